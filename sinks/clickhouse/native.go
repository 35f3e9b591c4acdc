package clickhouse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/ClickHouse/ch-go/proto"
	chcolumn "github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"

	"github.com/sluicecdc/sluice/batch"
)

// The sink fills the columns of an insert's block from Arrow buffers through their Native
// encoding, the column layout ClickHouse blocks have on the wire:
//
//	T                   the values of T: fixed-width little-endian, String as uvarint length + bytes
//	Nullable(T)         one byte per row (1 for NULL), then the values of T (zero under NULL)
//	Array(Nullable(T))  each row's end offset into the elements (UInt64, cumulative), then the
//	                    elements as Nullable(T)
//
// clickhouse-go keeps a block's columns as ch-go proto columns behind its lib/column types, and
// Batch.Columns hands out the block's own columns, whose Decode fills them from that encoding.
// The sink writes the encoding straight from the Arrow buffers, a chunk at a time (bulk copies
// for integers and floats, one conversion per value for the others), and the column decodes it
// into its own storage: no per-row Go values, no boxing, no reflection, and the block is still
// the one the driver sends, so an insert stays one block.

// chunkItems is the number of values encoded at a time while a column is decoded: the encoding
// of a whole column is never held.
const chunkItems = 4096

// section is one part of a column's Native encoding: n items, appended by put a range at a time,
// in order from the first (a put may carry state from one range to the next).
type section struct {
	n   int
	put func(b *proto.Buffer, from, to int)
}

// sectionReader reads the Native encoding of its sections, encoding chunkItems items at a time.
type sectionReader struct {
	secs      []section
	sec, next int // the section being read and its next item
	buf       proto.Buffer
	off       int // read offset in buf
}

// reset makes r read secs from the start.
func (r *sectionReader) reset(secs []section) {
	r.secs, r.sec, r.next, r.off = secs, 0, 0, 0
	r.buf.Reset()
}

// Read implements io.Reader.
func (r *sectionReader) Read(p []byte) (int, error) {
	for r.off == len(r.buf.Buf) {
		if r.sec == len(r.secs) {
			return 0, io.EOF
		}
		s := r.secs[r.sec]
		if r.next >= s.n {
			r.sec, r.next = r.sec+1, 0
			continue
		}
		to := min(r.next+chunkItems, s.n)
		r.buf.Reset()
		r.off = 0
		s.put(&r.buf, r.next, to)
		r.next = to
	}
	n := copy(p, r.buf.Buf[r.off:])
	r.off += n
	return n, nil
}

// nativeFiller decodes Native encodings into the columns of one insert's block.
type nativeFiller struct {
	src *sectionReader
	rd  *proto.Reader
}

func newNativeFiller() *nativeFiller {
	src := &sectionReader{}
	return &nativeFiller{src: src, rd: proto.NewReader(src)}
}

// fill decodes secs, the encoding of rows rows, into col, an empty column of the block. An
// encoding longer or shorter than col's type reads is an error: the encoding does not match the
// column.
func (f *nativeFiller) fill(col chcolumn.Interface, rows int, secs []section) error {
	if n := col.Rows(); n != 0 {
		return fmt.Errorf("the column already holds %d rows", n)
	}
	f.src.reset(secs)
	if err := col.Decode(f.rd, rows); err != nil {
		return fmt.Errorf("decoding %d rows: %w", rows, err)
	}
	if _, err := f.rd.ReadByte(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("the encoding of %d rows is longer than the column read (%v)", rows, err)
	}
	if n := col.Rows(); n != rows {
		return fmt.Errorf("the column holds %d rows after decoding %d", n, rows)
	}
	return nil
}

// codec encodes the values of one Arrow array as one ClickHouse type.
type codec struct {
	width int                                 // bytes of the type's zero value (1 for String: its length)
	check func(i int) error                   // the error of value i, not NULL; nil when every value fits
	put   func(b *proto.Buffer, from, to int) // appends values [from, to), the zero value under NULL
}

// codecFor returns the codec of an Arrow array of the batch mapping for its column type in the
// modern or compatible layout (columnType).
func codecFor(arr arrow.Array, modern bool) (codec, error) {
	switch a := arr.(type) {
	case *array.Int16:
		return copied(a, 2, func(b *proto.Buffer, from, to int) { proto.ColInt16(a.Int16Values()[from:to]).EncodeColumn(b) }), nil
	case *array.Int32:
		return copied(a, 4, func(b *proto.Buffer, from, to int) { proto.ColInt32(a.Int32Values()[from:to]).EncodeColumn(b) }), nil
	case *array.Int64:
		return copied(a, 8, func(b *proto.Buffer, from, to int) { proto.ColInt64(a.Int64Values()[from:to]).EncodeColumn(b) }), nil
	case *array.Float32:
		return copied(a, 4, func(b *proto.Buffer, from, to int) { proto.ColFloat32(a.Float32Values()[from:to]).EncodeColumn(b) }), nil
	case *array.Float64:
		return copied(a, 8, func(b *proto.Buffer, from, to int) { proto.ColFloat64(a.Float64Values()[from:to]).EncodeColumn(b) }), nil
	case *array.Decimal128:
		return decimalCodec(a)
	case *array.String:
		return codec{width: 1, put: func(b *proto.Buffer, from, to int) {
			for i := from; i < to; i++ {
				if a.IsNull(i) {
					b.PutByte(0)
					continue
				}
				b.PutString(a.Value(i))
			}
		}}, nil
	case *array.Binary:
		return codec{width: 1, put: func(b *proto.Buffer, from, to int) {
			for i := from; i < to; i++ {
				if a.IsNull(i) {
					b.PutByte(0)
					continue
				}
				v := a.Value(i)
				b.PutUVarInt(uint64(len(v)))
				b.PutRaw(v)
			}
		}}, nil
	case *array.Boolean: // Bool and UInt8 alike: one byte, 0 or 1
		return codec{width: 1, put: func(b *proto.Buffer, from, to int) {
			for i := from; i < to; i++ {
				b.PutBool(a.IsValid(i) && a.Value(i))
			}
		}}, nil
	case *array.Date32:
		return dateCodec(a, modern), nil
	case *array.Timestamp:
		return timestampCodec(a, modern), nil
	case *array.Time64:
		return textCodec(a, func(dst []byte, i int) []byte { return batch.AppendTime(dst, int64(a.Value(i))) }), nil
	case *array.MonthDayNanoInterval:
		return textCodec(a, func(dst []byte, i int) []byte { return batch.AppendInterval(dst, a.Value(i)) }), nil
	case *extensions.UUIDArray:
		return uuidCodec(a)
	}
	return codec{}, fmt.Errorf("arrow type %s has no ClickHouse mapping in this sink", arr.DataType())
}

// copied is the codec of values whose Arrow buffer already holds their Native encoding: enc
// copies a range in bulk; the slots under NULL are zeroed afterwards.
func copied(arr arrow.Array, width int, enc func(b *proto.Buffer, from, to int)) codec {
	return codec{width: width, put: func(b *proto.Buffer, from, to int) {
		start := len(b.Buf)
		enc(b, from, to)
		if arr.NullN() == 0 {
			return
		}
		for i := from; i < to; i++ {
			if arr.IsNull(i) {
				at := start + (i-from)*width
				clear(b.Buf[at : at+width])
			}
		}
	}}
}

// decimalCodec narrows decimal128(p,s) to ClickHouse Decimal(p, s): Decimal32 for p <= 9,
// Decimal64 for p <= 18, Decimal128 above (the same 16 bytes as Arrow's). A value that does not
// fit the narrower width (a batch value with more digits than its precision) is refused, never
// wrapped.
func decimalCodec(a *array.Decimal128) (codec, error) {
	dt := a.DataType().(*arrow.Decimal128Type)
	vals := a.Values()
	typ := fmt.Sprintf("Decimal(%d, %d)", dt.Precision, dt.Scale)
	var width int
	switch {
	case dt.Precision <= 9:
		width = 4
	case dt.Precision <= 18:
		width = 8
	case dt.Precision <= 38:
		width = 16
	default:
		return codec{}, fmt.Errorf("arrow type %s has no ClickHouse mapping in this sink", dt)
	}
	c := codec{width: width}
	if width < 16 {
		bits := uint(width*8 - 1)
		c.check = func(i int) error {
			v := vals[i]
			lo, hi := int64(v.LowBits()), v.HighBits()
			if hi != lo>>63 || lo>>bits != lo>>63 { // not the sign extension of width bytes
				return &rangeError{value: v.ToString(dt.Scale),
					reason: fmt.Sprintf("overflows ClickHouse %s, which holds %d bytes", typ, width)}
			}
			return nil
		}
	}
	c.put = func(b *proto.Buffer, from, to int) {
		for i := from; i < to; i++ {
			v := vals[i]
			if a.IsNull(i) {
				v = decimal128.Num{}
			}
			switch width {
			case 4:
				b.PutUInt32(uint32(v.LowBits()))
			case 8:
				b.PutUInt64(v.LowBits())
			default:
				b.PutUInt64(v.LowBits())
				b.PutUInt64(uint64(v.HighBits()))
			}
		}
	}
	return c, nil
}

// dateCodec writes days since 1970 as Date32 (Int32) or Date (UInt16), refusing days the type
// cannot hold (dateValue).
func dateCodec(a *array.Date32, modern bool) codec {
	vals := a.Date32Values()
	lo, hi := dateBounds(modern)
	c := codec{width: 2, check: func(i int) error {
		if d := int64(vals[i]); d < lo || d > hi {
			_, err := dateValue(vals[i], modern)
			return err
		}
		return nil
	}}
	if modern {
		c.width = 4
	}
	c.put = func(b *proto.Buffer, from, to int) {
		for i := from; i < to; i++ {
			d := vals[i]
			if a.IsNull(i) {
				d = 0
			}
			if modern {
				b.PutInt32(int32(d))
			} else {
				b.PutUInt16(uint16(d))
			}
		}
	}
	return c
}

// timestampCodec writes microseconds since 1970 as DateTime64(6) (Int64) or DateTime (UInt32
// seconds, the fraction dropped toward the past), refusing times the type cannot hold
// (timestampValue).
func timestampCodec(a *array.Timestamp, modern bool) codec {
	vals := a.TimestampValues()
	lo, hi := timestampBounds(modern)
	c := codec{width: 4, check: func(i int) error {
		if us := int64(vals[i]); us < lo || us > hi {
			_, err := timestampValue(us, modern)
			return err
		}
		return nil
	}}
	if modern {
		c.width = 8
	}
	c.put = func(b *proto.Buffer, from, to int) {
		for i := from; i < to; i++ {
			us := int64(vals[i])
			if a.IsNull(i) {
				us = 0
			}
			if modern {
				b.PutInt64(us)
			} else {
				b.PutUInt32(uint32(us / 1e6)) // us >= 0 (checked), so division rounds toward the past
			}
		}
	}
	return c
}

// textCodec writes the text appendText prints for each value as a String.
func textCodec(arr arrow.Array, appendText func(dst []byte, i int) []byte) codec {
	var text []byte // reused: put runs one range at a time
	return codec{width: 1, put: func(b *proto.Buffer, from, to int) {
		for i := from; i < to; i++ {
			if arr.IsNull(i) {
				b.PutByte(0)
				continue
			}
			text = appendText(text[:0], i)
			b.PutUVarInt(uint64(len(text)))
			b.PutRaw(text)
		}
	}}
}

// uuidCodec writes UUIDs as ClickHouse stores them: two little-endian 64-bit halves.
func uuidCodec(a *extensions.UUIDArray) (codec, error) {
	st, ok := a.Storage().(*array.FixedSizeBinary)
	if !ok || st.DataType().(*arrow.FixedSizeBinaryType).ByteWidth != 16 {
		return codec{}, fmt.Errorf("arrow uuid storage %s is not fixed_size_binary(16)", a.Storage().DataType())
	}
	return codec{width: 16, put: func(b *proto.Buffer, from, to int) {
		for i := from; i < to; i++ {
			if a.IsNull(i) {
				b.PutUInt64(0)
				b.PutUInt64(0)
				continue
			}
			v := st.Value(i)
			b.PutUInt64(binary.BigEndian.Uint64(v[:8]))
			b.PutUInt64(binary.BigEndian.Uint64(v[8:]))
		}
	}}, nil
}

// nullMap appends the null map of arr's values [from, to): 1 for NULL.
func nullMap(arr arrow.Array) func(b *proto.Buffer, from, to int) {
	return func(b *proto.Buffer, from, to int) {
		if arr.NullN() == 0 {
			b.Buf = append(b.Buf, make([]byte, to-from)...)
			return
		}
		for i := from; i < to; i++ {
			b.PutBool(arr.IsNull(i))
		}
	}
}

// zeros appends the zero value of a type width bytes wide, once per item.
func zeros(width int) func(b *proto.Buffer, from, to int) {
	return func(b *proto.Buffer, from, to int) { b.Buf = append(b.Buf, make([]byte, (to-from)*width)...) }
}

// repeat appends the byte v once per item.
func repeat(v byte) func(b *proto.Buffer, from, to int) {
	return func(b *proto.Buffer, from, to int) {
		for range to - from {
			b.PutByte(v)
		}
	}
}

// dataSections returns the Native encoding of a data or metadata column from arr, with extra
// trailing rows (NULL, an empty array, or the zero value of a column that is not Nullable). A
// value the column cannot hold is a *rangeError naming its row.
func dataSections(arr arrow.Array, modern, nullable bool, extra int) ([]section, error) {
	if l, ok := arr.(*array.List); ok {
		return listSections(l, modern, extra)
	}
	c, err := codecFor(arr, modern)
	if err != nil {
		return nil, err
	}
	n := arr.Len()
	if c.check != nil || (!nullable && arr.NullN() > 0) {
		for i := range n {
			if arr.IsNull(i) {
				if !nullable {
					return nil, &rangeError{row: i, value: "NULL", reason: "in a column that is not Nullable (a key or a context column)"}
				}
				continue
			}
			if c.check != nil {
				if err := c.check(i); err != nil {
					return nil, withRow(err, i)
				}
			}
		}
	}
	var secs []section
	if nullable {
		secs = append(secs, section{n, nullMap(arr)}, section{extra, repeat(1)})
	}
	return append(secs, section{n, c.put}, section{extra, zeros(c.width)}), nil
}

// run is a range of a list's element indexes that follow each other in the encoding.
type run struct {
	at, start, n int // position in the encoding, first element index, elements
}

// listSections returns the Native encoding of a list column as Array(Nullable(T)): a NULL list
// and the extra rows are empty arrays.
func listSections(l *array.List, modern bool, extra int) ([]section, error) {
	elems := l.ListValues()
	c, err := codecFor(elems, modern)
	if err != nil {
		return nil, err
	}
	n := l.Len()
	var runs []run
	total := 0
	for i := range n {
		if l.IsNull(i) {
			continue
		}
		start, end := l.ValueOffsets(i)
		s, e := int(start), int(end)
		if c.check != nil {
			for j := s; j < e; j++ {
				if elems.IsValid(j) {
					if err := c.check(j); err != nil {
						return nil, withRow(fmt.Errorf("array element %d: %w", j-s+1, err), i)
					}
				}
			}
		}
		if e == s {
			continue
		}
		if k := len(runs) - 1; k >= 0 && runs[k].start+runs[k].n == s {
			runs[k].n += e - s
		} else {
			runs = append(runs, run{at: total, start: s, n: e - s})
		}
		total += e - s
	}
	var end uint64 // the cumulative offset, carried from one range of rows to the next
	offsets := func(b *proto.Buffer, from, to int) {
		if from == 0 {
			end = 0
		}
		for i := from; i < to; i++ {
			if l.IsValid(i) {
				start, stop := l.ValueOffsets(i)
				end += uint64(stop - start)
			}
			b.PutUInt64(end)
		}
	}
	return []section{
		{n, offsets},
		{extra, func(b *proto.Buffer, from, to int) {
			for range to - from {
				b.PutUInt64(uint64(total))
			}
		}},
		{total, overRuns(runs, nullMap(elems))},
		{total, overRuns(runs, c.put)},
	}, nil
}

// overRuns maps a range of positions in the encoding to the element ranges of runs.
func overRuns(runs []run, put func(b *proto.Buffer, from, to int)) func(b *proto.Buffer, from, to int) {
	return func(b *proto.Buffer, from, to int) {
		k := sort.Search(len(runs), func(k int) bool { return runs[k].at+runs[k].n > from })
		for ; k < len(runs) && from < to; k++ {
			r := runs[k]
			upto := min(to, r.at+r.n)
			put(b, r.start+from-r.at, r.start+upto-r.at)
			from = upto
		}
	}
}
