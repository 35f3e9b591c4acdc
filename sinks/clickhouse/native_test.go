package clickhouse

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	chproto "github.com/ClickHouse/ch-go/proto"
	chcolumn "github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
)

// newBlock returns an empty block of l's columns, as the driver builds an insert's block from the
// server's header.
func newBlock(tb testing.TB, l *layout) *proto.Block {
	tb.Helper()
	block := proto.NewBlock()
	for _, c := range l.cols {
		if err := block.AddColumn(c.name, chcolumn.Type(c.typ)); err != nil {
			tb.Fatalf("column %s %s: %v", c.name, c.typ, err)
		}
	}
	return block
}

// oldBlock fills a block the way the sink did before: the driver appends each column's slice.
func oldBlock(tb testing.TB, cv *converter) (*proto.Block, error) {
	tb.Helper()
	block := newBlock(tb, cv.l)
	for i, col := range block.Columns {
		v, err := oldColumn(cv, i)
		if err != nil {
			return nil, err
		}
		if _, err := col.Append(v); err != nil {
			return nil, fmt.Errorf("column %s: %w", col.Name(), err)
		}
	}
	return block, nil
}

// newNativeBlock fills a block the way the sink does: from the Native encoding of the record.
func newNativeBlock(tb testing.TB, cv *converter) (*proto.Block, error) {
	tb.Helper()
	block := newBlock(tb, cv.l)
	for i, col := range block.Columns {
		if err := cv.fill(i, col); err != nil {
			return nil, err
		}
	}
	return block, nil
}

func encodeColumn(col chcolumn.Interface) []byte {
	var b chproto.Buffer
	col.Encode(&b)
	return b.Buf
}

// firstRowDiff returns the first row whose value differs between two columns, as the driver
// reads them back.
func firstRowDiff(a, b chcolumn.Interface) string {
	for r := range min(a.Rows(), b.Rows()) {
		va, vb := fmt.Sprint(deref(a.Row(r, false))), fmt.Sprint(deref(b.Row(r, false)))
		if va != vb {
			return fmt.Sprintf("row %d: driver slices %s, native %s", r, va, vb)
		}
	}
	return fmt.Sprintf("rows %d and %d", a.Rows(), b.Rows())
}

func deref(v any) any {
	switch x := v.(type) {
	case []*string:
		return derefs(x)
	case []*int16:
		return derefs(x)
	case []*int32:
		return derefs(x)
	case []*int64:
		return derefs(x)
	}
	return v
}

func derefs[T any](v []*T) []any {
	out := make([]any, len(v))
	for i, p := range v {
		if p != nil {
			out[i] = *p
		}
	}
	return out
}

// TestNativeEncodingMatchesDriverSlices: on every type of the batch mapping, as a key column
// (not Nullable), a Nullable column and an array, and every context column, in both layouts,
// the block the sink fills from the record's Native encoding is byte for byte the block the
// driver built from the per-row slices the sink used to hand it: the server receives the same
// bytes. The batches cross the encoder's chunks (chunkItems) in rows and in array elements.
func TestNativeEncodingMatchesDriverSlices(t *testing.T) {
	t.Parallel()
	hi := batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: 0x2000000, Seq: 7}}
	for _, modern := range []bool{true, false} {
		spec := allTypesSpecFor(modern)
		l, err := newLayout(spec, "raw", "alltypes", modern)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			rows   int
			marker bool
			slice  [2]int64 // rows kept, as batch.DropCovered slices a record; zero: all
		}{
			{"rows and marker", chunkItems + 904, true, [2]int64{}},
			{"snapshot chunk without marker", 1500, false, [2]int64{}},
			{"one row", 1, true, [2]int64{}},
			{"marker only", 0, true, [2]int64{}},
			{"sliced record", 1500, true, [2]int64{101, 1487}},
		} {
			t.Run(fmt.Sprintf("modern=%v/%s", modern, tc.name), func(t *testing.T) {
				t.Parallel()
				rec := buildRecord(t, spec, allTypesChanges(tc.rows, modern))
				if tc.slice != [2]int64{} {
					rec = rec.NewSlice(tc.slice[0], tc.slice[1])
					defer rec.Release()
				}
				cv, err := l.converter(rec, hi, tc.marker)
				if err != nil {
					t.Fatal(err)
				}
				want, err := oldBlock(t, cv)
				if err != nil {
					t.Fatalf("driver slices: %v", err)
				}
				got, err := newNativeBlock(t, cv)
				if err != nil {
					t.Fatalf("native: %v", err)
				}
				for i, c := range l.cols {
					w, g := want.Columns[i], got.Columns[i]
					if !bytes.Equal(encodeColumn(w), encodeColumn(g)) {
						t.Errorf("column %s (%s) differs: %s", c.name, c.typ, firstRowDiff(w, g))
					}
				}
				var wb, gb chproto.Buffer
				if err := want.Encode(&wb, 0); err != nil {
					t.Fatal(err)
				}
				if err := got.Encode(&gb, 0); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(wb.Buf, gb.Buf) {
					t.Errorf("the blocks differ (%d and %d bytes)", len(wb.Buf), len(gb.Buf))
				}
				if got.Rows() != cv.rows() {
					t.Errorf("the block holds %d rows, want %d", got.Rows(), cv.rows())
				}
			})
		}
	}
}

// TestNativeListEdges: a NULL list whose slot still spans elements (Arrow allows it; the
// elements are not part of any row), lists that start past the first element, and a sliced
// list encode as the driver encoded the slices: NULL lists are empty arrays.
func TestNativeListEdges(t *testing.T) {
	t.Parallel()
	mem := memory.NewGoAllocator()
	// offsets 0,2,5,5,7,9: row 1 is NULL but spans elements 2..4.
	elems := array.NewInt32Builder(mem)
	elems.AppendValues([]int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, []bool{true, false, true, true, true, true, true, true, false})
	values := elems.NewArray()
	defer values.Release()
	offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{0, 2, 5, 5, 7, 9}))
	validity := memory.NewBufferBytes([]byte{0b11101})
	data := array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Int32), 5, []*memory.Buffer{validity, offsets}, []arrow.ArrayData{values.Data()}, 1, 0)
	defer data.Release()
	list := array.NewListData(data)
	defer list.Release()
	sliced := array.NewSlice(list, 1, 5)
	defer sliced.Release()
	for _, tc := range []struct {
		name string
		arr  arrow.Array
	}{{"null list spanning elements", list}, {"sliced", sliced}} {
		for _, extra := range []int{0, 1} {
			old, err := oldConvertColumn(tc.arr, false, false, extra)
			if err != nil {
				t.Fatal(err)
			}
			secs, err := dataSections(tc.arr, false, false, extra)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := chcolumn.Type("Array(Nullable(Int32))").Column("a", &chcolumn.ServerContext{})
			got, _ := chcolumn.Type("Array(Nullable(Int32))").Column("a", &chcolumn.ServerContext{})
			if _, err := want.Append(old); err != nil {
				t.Fatal(err)
			}
			if err := newNativeFiller().fill(got, tc.arr.Len()+extra, secs); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if !bytes.Equal(encodeColumn(want), encodeColumn(got)) {
				t.Errorf("%s, %d extra: %s", tc.name, extra, firstRowDiff(want, got))
			}
		}
	}
}

// TestNativeRefusesWhatDriverSlicesRefused: values a column cannot hold (dates and times outside
// the layout's range, in keys, Nullable columns and array elements; a NULL in a column that is
// not Nullable) stop the batch with the error the sink gave before, naming the same row.
func TestNativeRefusesWhatDriverSlicesRefused(t *testing.T) {
	t.Parallel()
	spec := allTypesSpecFor(false)
	// Values of the modern range include dates and times before 1970 and after 2106: the
	// compatible layout refuses them in every date and time column.
	rec := buildRecord(t, spec, allTypesChanges(600, true))
	l, err := newLayout(spec, "raw", "alltypes", false)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := l.converter(rec, batch.SourcePosition{}, false)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i, c := range l.cols {
		_, oldErr := oldColumn(cv, i)
		_, newErr := cv.sections(i)
		if fmt.Sprint(oldErr) != fmt.Sprint(newErr) || sinks.IsPoison(oldErr) != sinks.IsPoison(newErr) {
			t.Errorf("column %s: driver slices: %v; native: %v", c.name, oldErr, newErr)
		}
		if newErr != nil {
			refused++
			if !strings.Contains(newErr.Error(), "row at ") || !strings.Contains(newErr.Error(), "outside the range of ClickHouse") {
				t.Errorf("column %s: the error names no row or no range: %v", c.name, newErr)
			}
		}
	}
	// date, timestamp, timestamptz as key (the timestamps Nullable: no key on this layout),
	// Nullable and array
	if want := 3 * 3; refused != want {
		t.Errorf("%d columns refused, want %d", refused, want)
	}

	mem := memory.NewGoAllocator()
	ib := array.NewInt64Builder(mem)
	ib.AppendValues([]int64{1, 0, 3}, []bool{true, false, true})
	ints := ib.NewArray()
	defer ints.Release()
	db := array.NewDate32Builder(mem)
	db.AppendValues([]arrow.Date32{day(2000, 1, 1), day(1960, 1, 1), 0}, []bool{true, true, false})
	dates := db.NewArray()
	defer dates.Release()
	for _, tc := range []struct {
		name     string
		arr      arrow.Array
		nullable bool
		row      int
	}{
		{"NULL in a key column", ints, false, 1},
		{"a date before 1970, Nullable", dates, true, 1},
		{"a date before 1970 before a NULL key", dates, false, 1},
	} {
		_, oldErr := oldConvertColumn(tc.arr, false, tc.nullable, 1)
		_, newErr := dataSections(tc.arr, false, tc.nullable, 1)
		var re *rangeError
		if !errors.As(newErr, &re) || re.row != tc.row || fmt.Sprint(oldErr) != fmt.Sprint(newErr) {
			t.Errorf("%s: driver slices: %v; native: %v (want a range error at row %d)", tc.name, oldErr, newErr, tc.row)
		}
	}
}

// TestNativeRangeBounds: at both ends of each layout's date and time range, the value just inside
// is written as the driver wrote it and the one just outside is refused with the same error.
func TestNativeRangeBounds(t *testing.T) {
	t.Parallel()
	mem := memory.NewGoAllocator()
	for _, modern := range []bool{true, false} {
		dlo, dhi := dateBounds(modern)
		tlo, thi := timestampBounds(modern)
		db := array.NewDate32Builder(mem)
		tb := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"})
		for _, tc := range []struct {
			name    string
			date    int64
			us      int64
			refused bool
		}{
			{"below", dlo - 1, tlo - 1, true},
			{"low", dlo, tlo, false},
			{"high", dhi, thi, false},
			{"above", dhi + 1, thi + 1, true},
		} {
			db.Append(arrow.Date32(tc.date))
			tb.Append(arrow.Timestamp(tc.us))
			dates, times := db.NewArray(), tb.NewArray()
			for _, arr := range []arrow.Array{dates, times} {
				old, oldErr := oldConvertColumn(arr, modern, true, 0)
				secs, newErr := dataSections(arr, modern, true, 0)
				if fmt.Sprint(oldErr) != fmt.Sprint(newErr) || (newErr != nil) != tc.refused {
					t.Errorf("modern=%v %s %s: driver slices: %v; native: %v", modern, tc.name, arr.DataType(), oldErr, newErr)
					continue
				}
				if newErr != nil {
					continue
				}
				typ, err := columnType(arr.DataType(), modern, true)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := chcolumn.Type(typ).Column("v", &chcolumn.ServerContext{})
				got, _ := chcolumn.Type(typ).Column("v", &chcolumn.ServerContext{})
				if _, err := want.Append(old); err != nil {
					t.Fatal(err)
				}
				if err := newNativeFiller().fill(got, 1, secs); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(encodeColumn(want), encodeColumn(got)) {
					t.Errorf("modern=%v %s %s: %s", modern, tc.name, typ, firstRowDiff(want, got))
				}
			}
			dates.Release()
			times.Release()
		}
	}
}

// TestDecimalNarrowingRefusesOverflow: decimal128(p,s) goes to Decimal32 (p <= 9) or Decimal64
// (p <= 18) without a per-value big.Int; a value that does not fit (a batch value with more
// digits than its precision) stops the batch as poison naming its row, never wraps. The driver
// refused exactly the same values.
func TestDecimalNarrowingRefusesOverflow(t *testing.T) {
	t.Parallel()
	big := func(hi int64, lo uint64) decimal128.Num { return decimal128.New(hi, lo) }
	for _, tc := range []struct {
		precision int32
		value     decimal128.Num
		fits      bool
	}{
		{9, decimal128.FromI64(1<<31 - 1), true},
		{9, decimal128.FromI64(-1 << 31), true},
		{9, decimal128.FromI64(1 << 31), false},
		{9, decimal128.FromI64(-1<<31 - 1), false},
		{18, decimal128.FromI64(1<<63 - 1), true},
		{18, decimal128.FromI64(-1 << 63), true},
		{18, big(0, 1<<63), false},
		{18, big(-2, 0), false},
		{38, big(1<<62, 0), true},
	} {
		t.Run(fmt.Sprintf("p=%d/%s", tc.precision, tc.value.ToString(2)), func(t *testing.T) {
			t.Parallel()
			dt := &arrow.Decimal128Type{Precision: tc.precision, Scale: 2}
			b := array.NewDecimal128Builder(memory.NewGoAllocator(), dt)
			b.AppendValues([]decimal128.Num{decimal128.FromI64(5), tc.value}, nil)
			arr := b.NewArray()
			defer arr.Release()

			secs, err := dataSections(arr, true, true, 0)
			var re *rangeError
			switch {
			case tc.fits && err != nil:
				t.Fatalf("refused a value that fits: %v", err)
			case !tc.fits && (!errors.As(err, &re) || re.row != 1 || !strings.Contains(err.Error(), "overflows ClickHouse Decimal")):
				t.Fatalf("got %v, want a range error at row 1", err)
			}
			typ := fmt.Sprintf("Nullable(Decimal(%d, 2))", tc.precision)
			old, err := oldConvertColumn(arr, true, true, 0)
			if err != nil {
				t.Fatal(err)
			}
			want, err := chcolumn.Type(typ).Column("d", &chcolumn.ServerContext{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := want.Append(old); (err == nil) != tc.fits {
				t.Fatalf("the driver's verdict differs: %v", err)
			}
			if !tc.fits {
				return
			}
			got, err := chcolumn.Type(typ).Column("d", &chcolumn.ServerContext{})
			if err != nil {
				t.Fatal(err)
			}
			if err := newNativeFiller().fill(got, 2, secs); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(encodeColumn(want), encodeColumn(got)) {
				t.Errorf("encodings differ: %s", firstRowDiff(want, got))
			}
		})
	}
}

// TestFillRefusesAnotherType: a block column whose type is not the one the layout writes (the
// table was changed outside Sluice) is poison naming both types, and nothing is decoded into it:
// a Native encoding read as another type would be garbage, not an error.
func TestFillRefusesAnotherType(t *testing.T) {
	t.Parallel()
	spec := ordersSpec("orders")
	l, err := newLayout(spec, "db", "orders", false)
	if err != nil {
		t.Fatal(err)
	}
	rec := buildRecord(t, spec, []batch.Change{orders.Insert(1, "a", 1)})
	cv, err := l.converter(rec, batch.SourcePosition{}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range l.cols {
		if c.name != "qty" {
			continue
		}
		col, err := chcolumn.Type("Nullable(Float32)").Column(c.name, &chcolumn.ServerContext{}) // as wide as Int32
		if err != nil {
			t.Fatal(err)
		}
		err = cv.fill(i, col)
		if !sinks.IsPoison(err) || !strings.Contains(err.Error(), "is Nullable(Float32) in ClickHouse, but Sluice writes Nullable(Int32)") {
			t.Fatalf("got %v, want poison naming both types", err)
		}
		if col.Rows() != 0 {
			t.Fatalf("%d rows decoded into the retyped column", col.Rows())
		}
	}
}
