package batch

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// AppendText appends one row straight from its text values (nil is NULL), as c's operation,
// position and commit time, with ingest as __ingest_ts. It is Build one row at a time, for a
// reader that streams rows (a snapshot chunk) and never holds them as Changes: raw may alias a
// connection's buffer, since every value is copied or converted before AppendText returns. The
// checks are Build's (a NULL key, a value the mapping cannot convert). On error every row
// appended since the last NewRecord is dropped.
func (b *RecordBuilder) AppendText(c *Change, raw [][]byte, ingest time.Time) error {
	return b.AppendRow(c, raw, nil, ingest)
}

// appendRow appends the data columns of one row, each value in the format formats gives (nil:
// all text).
func (b *RecordBuilder) appendRow(c *Change, raw [][]byte, formats []int16) error {
	if len(raw) != len(b.columns) {
		return fmt.Errorf("building record of %s: row at %s has %d values, the table has %d columns",
			b.table, c.Pos, len(raw), len(b.columns))
	}
	for j, v := range raw {
		col, enc := &b.columns[j], &b.enc[j]
		if v == nil {
			if col.Key {
				return &ValueError{Table: b.table, Column: col.Name, Type: col.TypeName, Kind: ErrMalformedValue,
					Reason: fmt.Sprintf("row at %s has a NULL key column", c.Pos),
					Hint:   "key columns must be NOT NULL; check the table's primary key or configured key"}
			}
			enc.appendNull()
			continue
		}
		if formats != nil && formats[j] == FormatBinary {
			if enc.appendBinary == nil {
				return fmt.Errorf("building record of %s: column %s (%s) was read in binary format, which it cannot take",
					b.table, col.Name, col.TypeName)
			}
			if err := enc.appendBinary(v); err != nil {
				return valueError(b.table, col, binaryShown(v), err)
			}
			continue
		}
		if err := enc.appendValue(v); err != nil {
			return valueError(b.table, col, v, err)
		}
	}
	return nil
}

// Reserve makes room for n more rows in every column, so appending them one at a time does not
// regrow the builders.
func (b *RecordBuilder) Reserve(n int) { b.rb.Reserve(n) }

// NewRecord returns the record of the rows appended with AppendText since the last one and
// starts a new one. The caller releases it.
func (b *RecordBuilder) NewRecord() arrow.RecordBatch { return b.rb.NewRecordBatch() }

// ReserveData makes room for n bytes of text values in column j when its Arrow type stores
// them (text, numeric carried as text, bytea); other columns ignore it.
func (b *RecordBuilder) ReserveData(j, n int) {
	if j >= 0 && j < len(b.enc) && b.enc[j].reserveData != nil && n > 0 {
		b.enc[j].reserveData(n)
	}
}
