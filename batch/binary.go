package batch

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
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

// binaryAppender returns the appendValue of a column read in Postgres' binary format (the
// type's send function, as a binary COPY or a binary result gives it): integers, floats, bool,
// dates, times and timestamps, uuid, bytea, and the text types whose binary form is their
// printed text (text, varchar, bpchar, name, json, jsonb). Each builds exactly the value the
// type's text form builds. It returns nil for every other type (numeric, interval, arrays,
// extension types, ...), which a snapshot reads as the text Postgres prints.
func binaryAppender(st scalarType, bld array.Builder) func([]byte) error {
	switch st.kind {
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
	return binaryOtherAppender(st, bld)
}

// binaryOtherAppender is binaryAppender for the kinds besides integers, dates and timestamps.
func binaryOtherAppender(st scalarType, bld array.Builder) func([]byte) error {
	switch st.kind {
	case kindBool:
		bb := bld.(*array.BooleanBuilder)
		return func(v []byte) error {
			if len(v) != 1 {
				return binaryLength(v, 1)
			}
			bb.Append(v[0] != 0)
			return nil
		}
	case kindFloat32:
		fb := bld.(*array.Float32Builder)
		return func(v []byte) error {
			if len(v) != 4 {
				return binaryLength(v, 4)
			}
			fb.Append(math.Float32frombits(binary.BigEndian.Uint32(v)))
			return nil
		}
	case kindFloat64:
		fb := bld.(*array.Float64Builder)
		return func(v []byte) error {
			if len(v) != 8 {
				return binaryLength(v, 8)
			}
			fb.Append(math.Float64frombits(binary.BigEndian.Uint64(v)))
			return nil
		}
	case kindTime:
		tb := bld.(*array.Time64Builder)
		return func(v []byte) error {
			x, err := binaryTime(v)
			tb.Append(x)
			return err
		}
	case kindUUID:
		ub := bld.(*extensions.UUIDBuilder)
		return func(v []byte) error {
			if len(v) != 16 {
				return binaryLength(v, 16)
			}
			ub.AppendBytes([16]byte(v))
			return nil
		}
	case kindBytea:
		bb := bld.(*array.BinaryBuilder)
		return func(v []byte) error {
			bb.Append(v)
			return nil
		}
	case kindText:
		return binaryTextAppender(st.textSend, bld)
	}
	return nil
}

// binaryTextAppender returns the appendValue of a text type whose binary form holds its printed
// text (nil for the others).
func binaryTextAppender(ts textSend, bld array.Builder) func([]byte) error {
	sb := bld.(*array.StringBuilder)
	switch ts {
	case textSendRaw:
		return func(v []byte) error {
			sb.BinaryBuilder.Append(v)
			return nil
		}
	case textSendJSONB:
		return func(v []byte) error {
			if len(v) == 0 || v[0] != 1 {
				return malformed("binary jsonb without its version byte 1")
			}
			sb.BinaryBuilder.Append(v[1:])
			return nil
		}
	}
	return nil
}

// binaryTime converts a binary time (int64 microseconds since midnight), refusing 24:00:00 as
// parseTime does.
func binaryTime(v []byte) (arrow.Time64, error) {
	if len(v) != 8 {
		return 0, binaryLength(v, 8)
	}
	us := int64(binary.BigEndian.Uint64(v))
	if us >= 86400_000_000 {
		return 0, notRepresentable(time24Hint, "24:00:00 is past the end of an arrow time64 day")
	}
	if us < 0 {
		return 0, malformed("binary time before midnight")
	}
	return arrow.Time64(us), nil
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

// BinaryFormats returns, per column, the format a snapshot read should ask Postgres for:
// FormatBinary for the columns outside the key whose type has a binary decoder (binaryAppender),
// which AppendRow then takes without parsing text (and Postgres sends without formatting it),
// FormatText for the others (the text Postgres prints). It is the one rule of which columns a
// snapshot reads in binary. Key columns stay text: a chunk's last key is the next chunk's
// cursor, a text parameter.
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
