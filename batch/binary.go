package batch

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Postgres result formats, as a snapshot read asks for them per column.
const (
	FormatText   int16 = 0
	FormatBinary int16 = 1
)

// Postgres counts dates and timestamps from 2000-01-01; Arrow from 1970-01-01.
const (
	pgEpochDays   = 10957
	pgEpochMicros = pgEpochDays * 86400_000_000
)

// binaryAppender returns the appendValue of a column read in Postgres' binary format: integers,
// dates and timestamps, which Postgres sends without formatting and which need no parsing. It
// returns nil for every other kind (read as text).
func binaryAppender(k kind, bld array.Builder) func([]byte) error {
	switch k {
	case kindInt16:
		ib := bld.(*array.Int16Builder)
		return func(v []byte) error {
			if len(v) != 2 {
				return binaryLength(v, 2)
			}
			ib.Append(int16(binary.BigEndian.Uint16(v)))
			return nil
		}
	case kindInt32:
		ib := bld.(*array.Int32Builder)
		return func(v []byte) error {
			if len(v) != 4 {
				return binaryLength(v, 4)
			}
			ib.Append(int32(binary.BigEndian.Uint32(v)))
			return nil
		}
	case kindInt64:
		ib := bld.(*array.Int64Builder)
		return func(v []byte) error {
			if len(v) != 8 {
				return binaryLength(v, 8)
			}
			ib.Append(int64(binary.BigEndian.Uint64(v)))
			return nil
		}
	case kindDate:
		db := bld.(*array.Date32Builder)
		return func(v []byte) error {
			x, err := binaryDate(v)
			db.Append(x)
			return err
		}
	case kindTimestamp, kindTimestamptz:
		tb := bld.(*array.TimestampBuilder)
		return func(v []byte) error {
			x, err := binaryTimestamp(v)
			tb.Append(x)
			return err
		}
	}
	return nil
}

// binaryDate converts a binary date (int32 days since 2000-01-01).
func binaryDate(v []byte) (arrow.Date32, error) {
	if len(v) != 4 {
		return 0, binaryLength(v, 4)
	}
	d := int32(binary.BigEndian.Uint32(v))
	switch d {
	case math.MaxInt32:
		return 0, notRepresentable(infinityHint, "date infinity has no arrow date32 equivalent")
	case math.MinInt32:
		return 0, notRepresentable(infinityHint, "date -infinity has no arrow date32 equivalent")
	}
	x := int64(d) + pgEpochDays
	if x > math.MaxInt32 || x < math.MinInt32 {
		return 0, notRepresentable("", "date out of the range of date32")
	}
	return arrow.Date32(x), nil
}

// binaryTimestamp converts a binary timestamp or timestamptz (int64 microseconds since
// 2000-01-01 00:00 UTC).
func binaryTimestamp(v []byte) (arrow.Timestamp, error) {
	if len(v) != 8 {
		return 0, binaryLength(v, 8)
	}
	us := int64(binary.BigEndian.Uint64(v))
	switch us {
	case math.MaxInt64:
		return 0, notRepresentable(infinityHint, "timestamp infinity has no arrow timestamp equivalent")
	case math.MinInt64:
		return 0, notRepresentable(infinityHint, "timestamp -infinity has no arrow timestamp equivalent")
	}
	t, ok := addInt64(us, pgEpochMicros)
	if !ok {
		return 0, notRepresentable("", "timestamp out of the range of microseconds since 1970 in 64 bits")
	}
	return arrow.Timestamp(t), nil
}

func binaryLength(v []byte, want int) error {
	return malformed("binary value of %d bytes, want %d", len(v), want)
}

// BinaryFormats returns, per column, the result format a snapshot read should ask Postgres for:
// FormatBinary for the integer, date and timestamp columns outside the key, which AppendRow then
// takes without parsing text (and Postgres sends without formatting it), FormatText for the
// others. Key columns stay text: a chunk's last key is the next chunk's cursor, a text parameter.
func (b *RecordBuilder) BinaryFormats() []int16 {
	out := make([]int16, len(b.columns))
	for j := range b.columns {
		if !b.columns[j].Key && b.enc[j].appendBinary != nil {
			out[j] = FormatBinary
		}
	}
	return out
}

// AppendRow is AppendText with each value in the format formats gives for its column (nil: all
// text); a binary value must be in a column BinaryFormats marks binary.
func (b *RecordBuilder) AppendRow(c *Change, raw [][]byte, formats []int16, ingest time.Time) error {
	if err := b.appendRow(c, raw, formats); err != nil {
		b.reset()
		return err
	}
	b.appendContext(c, arrow.Timestamp(ingest.UnixMicro()))
	return nil
}

// binaryShown is how a binary value shows in an error: hex, as Postgres prints bytea.
func binaryShown(v []byte) []byte { return fmt.Appendf(nil, "\\x%x", v) }
