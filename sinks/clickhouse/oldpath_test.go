package clickhouse

// The sink's conversion of Arrow columns before it filled the driver's columns from Arrow
// directly (native.go): one Go slice per column ([]T, []*T, [][]*T for lists) that the driver's
// batch converts again, value by value. Kept here only as the reference the Native encoding is
// checked against (TestNativeEncodingMatchesDriverSlices) and measured against
// (BenchmarkConvertOrders).

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/sluicecdc/sluice/batch"
)

// oldSliceBuilder turns one Arrow column into the Go slice the driver appends to a ClickHouse
// column, with extra trailing rows for the position marker.
type oldSliceBuilder interface {
	// scalar returns []T, or []*T when nullable (nil for NULL and for the extra rows).
	scalar(nullable bool, extra int) (any, error)
	// list returns [][]*T from a list column whose child this builder reads; NULL lists and
	// the extra rows are empty arrays.
	list(l *array.List, extra int) (any, error)
}

// typed is the oldSliceBuilder of one Go type.
type oldTyped[T any] struct {
	arr  arrow.Array
	zero T // the value of non-nullable columns in extra rows
	get  func(i int) (T, error)
}

func (t oldTyped[T]) scalar(nullable bool, extra int) (any, error) {
	n := t.arr.Len()
	if nullable {
		out := make([]*T, n+extra)
		vals := make([]T, n)
		for i := 0; i < n; i++ {
			if t.arr.IsNull(i) {
				continue
			}
			v, err := t.get(i)
			if err != nil {
				return nil, withRow(err, i)
			}
			vals[i] = v
			out[i] = &vals[i]
		}
		return out, nil
	}
	out := make([]T, n+extra)
	for i := 0; i < n; i++ {
		if t.arr.IsNull(i) {
			return nil, &rangeError{row: i, value: "NULL", reason: "in a column that is not Nullable (a key or a context column)"}
		}
		v, err := t.get(i)
		if err != nil {
			return nil, withRow(err, i)
		}
		out[i] = v
	}
	for i := n; i < n+extra; i++ {
		out[i] = t.zero
	}
	return out, nil
}

func (t oldTyped[T]) list(l *array.List, extra int) (any, error) {
	n := l.Len()
	out := make([][]*T, n+extra)
	vals := make([]T, t.arr.Len())
	for i := 0; i < n; i++ {
		if l.IsNull(i) {
			out[i] = []*T{}
			continue
		}
		start, end := l.ValueOffsets(i)
		row := make([]*T, 0, end-start)
		for j := int(start); j < int(end); j++ {
			if t.arr.IsNull(j) {
				row = append(row, nil)
				continue
			}
			v, err := t.get(j)
			if err != nil {
				return nil, withRow(fmt.Errorf("array element %d: %w", j-int(start)+1, err), i)
			}
			vals[j] = v
			row = append(row, &vals[j])
		}
		out[i] = row
	}
	for i := n; i < n+extra; i++ {
		out[i] = []*T{}
	}
	return out, nil
}

// oldConvertColumn returns the driver slice of one record column for a ClickHouse column of the
// modern or compatible layout.
func oldConvertColumn(arr arrow.Array, modern, nullable bool, extra int) (any, error) {
	if l, ok := arr.(*array.List); ok {
		b, err := oldBuilderFor(l.ListValues(), modern)
		if err != nil {
			return nil, err
		}
		return b.list(l, extra)
	}
	b, err := oldBuilderFor(arr, modern)
	if err != nil {
		return nil, err
	}
	return b.scalar(nullable, extra)
}

// oldBuilderFor returns the oldSliceBuilder of an Arrow array of the batch mapping.
func oldBuilderFor(arr arrow.Array, modern bool) (oldSliceBuilder, error) {
	switch a := arr.(type) {
	case *array.Int16:
		return oldTyped[int16]{arr: a, get: func(i int) (int16, error) { return a.Value(i), nil }}, nil
	case *array.Int32:
		return oldTyped[int32]{arr: a, get: func(i int) (int32, error) { return a.Value(i), nil }}, nil
	case *array.Int64:
		return oldTyped[int64]{arr: a, get: func(i int) (int64, error) { return a.Value(i), nil }}, nil
	case *array.Float32:
		return oldTyped[float32]{arr: a, get: func(i int) (float32, error) { return a.Value(i), nil }}, nil
	case *array.Float64:
		return oldTyped[float64]{arr: a, get: func(i int) (float64, error) { return a.Value(i), nil }}, nil
	case *array.Decimal128:
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		return oldTyped[decimal.Decimal]{arr: a, get: func(i int) (decimal.Decimal, error) {
			return decimal.NewFromBigInt(a.Value(i).BigInt(), -scale), nil
		}}, nil
	case *array.String:
		return oldTyped[string]{arr: a, get: func(i int) (string, error) { return a.Value(i), nil }}, nil
	case *array.Binary:
		return oldTyped[string]{arr: a, get: func(i int) (string, error) { return string(a.Value(i)), nil }}, nil
	case *array.Boolean:
		if modern {
			return oldTyped[bool]{arr: a, get: func(i int) (bool, error) { return a.Value(i), nil }}, nil
		}
		return oldTyped[uint8]{arr: a, get: func(i int) (uint8, error) {
			if a.Value(i) {
				return 1, nil
			}
			return 0, nil
		}}, nil
	case *array.Date32:
		return oldTyped[time.Time]{arr: a, zero: minDate, get: func(i int) (time.Time, error) { return dateValue(a.Value(i), modern) }}, nil
	case *array.Time64:
		return oldTyped[string]{arr: a, get: func(i int) (string, error) { return oldFormatTime(int64(a.Value(i))), nil }}, nil
	case *array.Timestamp:
		return oldTyped[time.Time]{arr: a, zero: minDate, get: func(i int) (time.Time, error) { return timestampValue(int64(a.Value(i)), modern) }}, nil
	case *array.MonthDayNanoInterval:
		return oldTyped[string]{arr: a, get: func(i int) (string, error) { return oldFormatInterval(a.Value(i)), nil }}, nil
	case *extensions.UUIDArray:
		return oldTyped[uuid.UUID]{arr: a, get: func(i int) (uuid.UUID, error) { return a.Value(i), nil }}, nil
	}
	return nil, fmt.Errorf("arrow type %s has no ClickHouse mapping in this sink", arr.DataType())
}

// oldFormatTime prints microseconds since midnight as Postgres prints a time: HH:MM:SS[.ffffff]
// without trailing zeros in the fraction.
func oldFormatTime(us int64) string {
	s := us / 1e6
	b := fmt.Appendf(nil, "%02d:%02d:%02d", s/3600, s/60%60, s%60)
	return string(oldAppendFraction(b, us%1e6))
}

// oldAppendFraction appends .ffffff without trailing zeros, nothing when frac is zero.
func oldAppendFraction(b []byte, frac int64) []byte {
	if frac == 0 {
		return b
	}
	f := fmt.Sprintf("%06d", frac)
	for f[len(f)-1] == '0' {
		f = f[:len(f)-1]
	}
	return append(append(b, '.'), f...)
}

// oldFormatInterval prints an interval as ISO 8601 (P1Y2M3DT4H5M6.5S; batch.AppendInterval).
func oldFormatInterval(v arrow.MonthDayNanoInterval) string {
	return string(batch.AppendInterval(nil, v))
}

// oldColumn returns the driver slice of column i of cv's layout, as the sink built it.
func oldColumn(cv *converter, i int) (any, error) {
	l, c := cv.l, cv.l.cols[i]
	n := int(cv.rec.NumRows())
	extra := 0
	if cv.marker {
		extra = 1
	}
	switch c.role {
	case roleData, roleMeta:
		v, err := oldConvertColumn(cv.rec.Column(c.field), l.modern, c.nullable, extra)
		if err != nil {
			return nil, l.valueError(c, cv.positions, err)
		}
		return v, nil
	case roleVersion:
		v := make([]uint64, n+extra)
		for r := range n {
			v[r] = cv.positions[r].LSN
		}
		if cv.marker {
			v[n] = cv.hi.Position.LSN
		}
		return v, nil
	case roleDeleted, roleMarker:
		v := make([]uint8, n+extra)
		for r := range n {
			if c.role == roleDeleted && cv.ops.Value(r) == batch.OpDelete.String() {
				v[r] = 1
			}
		}
		if cv.marker {
			v[n] = 1
		}
		return v, nil
	case rolePosition:
		v := make([]string, n+extra)
		if cv.marker {
			v[n] = cv.hi.String()
		}
		return v, nil
	}
	return nil, fmt.Errorf("table %s: column %s has no role", l.source, c.name)
}
