package batch

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var testTable = TableName{Schema: "shop", Name: "orders"}

// txt is a non-null Value.
func txt(s string) Value { return Value{Text: []byte(s)} }

// null is a NULL Value.
var null = Value{Null: true}

// buildColumn builds a record of one column holding vals and returns the column's values as
// Go values (see goValues), or the build error.
func buildColumn(t *testing.T, col Column, vals ...Value) ([]any, error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rb, err := NewRecordBuilder(mem, Schema{Table: testTable, Columns: []Column{col}})
	if err != nil {
		return nil, err
	}
	defer rb.Release()
	rows := make([]Change, len(vals))
	for i, v := range vals {
		rows[i] = Change{Op: OpInsert, Pos: Position{LSN: 1, Seq: uint32(i)}, Values: []Value{v}}
	}
	rec, err := rb.Build(rows, time.Unix(0, 0))
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	return goValues(rec.Column(0)), nil
}

// goValues returns the values of an array as Go values: nil for NULL, the Arrow value type
// otherwise ([]any for lists, string for utf8, []byte for binary, [16]byte for uuid).
func goValues(a arrow.Array) []any {
	out := make([]any, a.Len())
	for i := range out {
		if a.IsNull(i) {
			continue
		}
		switch a := a.(type) {
		case *array.Boolean:
			out[i] = a.Value(i)
		case *array.Int16:
			out[i] = a.Value(i)
		case *array.Int32:
			out[i] = a.Value(i)
		case *array.Int64:
			out[i] = a.Value(i)
		case *array.Float32:
			out[i] = a.Value(i)
		case *array.Float64:
			out[i] = a.Value(i)
		case *array.Decimal128:
			out[i] = a.Value(i)
		case *array.String:
			out[i] = a.Value(i)
		case *array.Binary:
			out[i] = append([]byte{}, a.Value(i)...)
		case *array.Date32:
			out[i] = a.Value(i)
		case *array.Time64:
			out[i] = a.Value(i)
		case *array.Timestamp:
			out[i] = a.Value(i)
		case *array.MonthDayNanoInterval:
			out[i] = a.Value(i)
		case *extensions.UUIDArray:
			out[i] = [16]byte(a.Value(i))
		case *array.List:
			start, end := a.ValueOffsets(i)
			sl := array.NewSlice(a.ListValues(), start, end)
			out[i] = goValues(sl)
			sl.Release()
		default:
			panic(fmt.Sprintf("goValues: unhandled %T", a))
		}
	}
	return out
}

// sameValues compares Go values, treating NaN as equal to NaN.
func sameValues(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		switch x := a[i].(type) {
		case float64:
			y, ok := b[i].(float64)
			if !ok || !(x == y && math.Signbit(x) == math.Signbit(y) || math.IsNaN(x) && math.IsNaN(y)) {
				return false
			}
		case float32:
			y, ok := b[i].(float32)
			if !ok || !(x == y && math.Signbit(float64(x)) == math.Signbit(float64(y)) || x != x && y != y) {
				return false
			}
		case []any:
			y, ok := b[i].([]any)
			if !ok || !sameValues(x, y) {
				return false
			}
		default:
			if !reflect.DeepEqual(a[i], b[i]) {
				return false
			}
		}
	}
	return true
}
