package clickhouse

import (
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/sluicecdc/sluice/batch"
)

// rangeError reports a value the target column cannot hold. It is never clamped.
type rangeError struct {
	row    int
	value  string
	reason string
	hint   string
}

func (e *rangeError) Error() string {
	msg := fmt.Sprintf("value %s %s", e.value, e.reason)
	if e.hint != "" {
		msg += ": " + e.hint
	}
	return msg
}

// The ranges the target types hold. Values outside them stop the table (poison) rather than
// being clamped, which is what the server would do silently.
var (
	// Date is days since 1970 in a UInt16; DateTime is seconds since 1970 in a UInt32.
	minDate     = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDate     = time.Date(2149, 6, 6, 0, 0, 0, 0, time.UTC)
	maxDateTime = time.Unix(math.MaxUint32, 0).UTC() // 2106-02-07 06:28:15
	// Date32 and DateTime64 hold 1900-01-01 to 2299-12-31; the driver converts DateTime64 through
	// nanoseconds since 1970, which end in April 2262.
	minDate32     = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDate32     = time.Date(2299, 12, 31, 0, 0, 0, 0, time.UTC)
	maxDateTime64 = time.Unix(0, math.MaxInt64).UTC().Truncate(time.Second)
)

const (
	legacyRangeHint = "the compatible layout (ClickHouse before 23.2) holds dates and times from 1970 to 2106 only; " +
		"use ClickHouse 23.2 or later (Date32, DateTime64: 1900 to 2262), or fix the value in Postgres"
	modernRangeHint = "ClickHouse Date32 and DateTime64 hold 1900 to 2262 here; fix the value in Postgres or leave the " +
		"column out of the publication"
)

// sliceBuilder turns one Arrow column into the Go slice the driver appends to a ClickHouse
// column, with extra trailing rows for the position marker.
type sliceBuilder interface {
	// scalar returns []T, or []*T when nullable (nil for NULL and for the extra rows).
	scalar(nullable bool, extra int) (any, error)
	// list returns [][]*T from a list column whose child this builder reads; NULL lists and
	// the extra rows are empty arrays.
	list(l *array.List, extra int) (any, error)
}

// typed is the sliceBuilder of one Go type.
type typed[T any] struct {
	arr  arrow.Array
	zero T // the value of non-nullable columns in extra rows
	get  func(i int) (T, error)
}

func (t typed[T]) scalar(nullable bool, extra int) (any, error) {
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

func (t typed[T]) list(l *array.List, extra int) (any, error) {
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

// withRow records the row of a conversion error.
func withRow(err error, row int) error {
	if re, ok := err.(*rangeError); ok {
		re.row = row
		return re
	}
	return &rangeError{row: row, value: "", reason: err.Error()}
}

// convertColumn returns the driver slice of one record column for a ClickHouse column of the
// modern or compatible layout.
func convertColumn(arr arrow.Array, modern, nullable bool, extra int) (any, error) {
	if l, ok := arr.(*array.List); ok {
		b, err := builderFor(l.ListValues(), modern)
		if err != nil {
			return nil, err
		}
		return b.list(l, extra)
	}
	b, err := builderFor(arr, modern)
	if err != nil {
		return nil, err
	}
	return b.scalar(nullable, extra)
}

// builderFor returns the sliceBuilder of an Arrow array of the batch mapping.
func builderFor(arr arrow.Array, modern bool) (sliceBuilder, error) {
	switch a := arr.(type) {
	case *array.Int16:
		return typed[int16]{arr: a, get: func(i int) (int16, error) { return a.Value(i), nil }}, nil
	case *array.Int32:
		return typed[int32]{arr: a, get: func(i int) (int32, error) { return a.Value(i), nil }}, nil
	case *array.Int64:
		return typed[int64]{arr: a, get: func(i int) (int64, error) { return a.Value(i), nil }}, nil
	case *array.Float32:
		return typed[float32]{arr: a, get: func(i int) (float32, error) { return a.Value(i), nil }}, nil
	case *array.Float64:
		return typed[float64]{arr: a, get: func(i int) (float64, error) { return a.Value(i), nil }}, nil
	case *array.Decimal128:
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		return typed[decimal.Decimal]{arr: a, get: func(i int) (decimal.Decimal, error) {
			return decimal.NewFromBigInt(a.Value(i).BigInt(), -scale), nil
		}}, nil
	case *array.String:
		return typed[string]{arr: a, get: func(i int) (string, error) { return a.Value(i), nil }}, nil
	case *array.Binary:
		return typed[string]{arr: a, get: func(i int) (string, error) { return string(a.Value(i)), nil }}, nil
	case *array.Boolean:
		if modern {
			return typed[bool]{arr: a, get: func(i int) (bool, error) { return a.Value(i), nil }}, nil
		}
		return typed[uint8]{arr: a, get: func(i int) (uint8, error) {
			if a.Value(i) {
				return 1, nil
			}
			return 0, nil
		}}, nil
	case *array.Date32:
		return typed[time.Time]{arr: a, zero: minDate, get: func(i int) (time.Time, error) { return dateValue(a.Value(i), modern) }}, nil
	case *array.Time64:
		return typed[string]{arr: a, get: func(i int) (string, error) { return formatTime(int64(a.Value(i))), nil }}, nil
	case *array.Timestamp:
		return typed[time.Time]{arr: a, zero: minDate, get: func(i int) (time.Time, error) { return timestampValue(int64(a.Value(i)), modern) }}, nil
	case *array.MonthDayNanoInterval:
		return typed[string]{arr: a, get: func(i int) (string, error) { return formatInterval(a.Value(i)), nil }}, nil
	case *extensions.UUIDArray:
		return typed[uuid.UUID]{arr: a, get: func(i int) (uuid.UUID, error) { return a.Value(i), nil }}, nil
	}
	return nil, fmt.Errorf("arrow type %s has no ClickHouse mapping in this sink", arr.DataType())
}

// dateValue converts days since 1970 to the time the driver writes, refusing what the target
// type cannot hold.
func dateValue(days arrow.Date32, modern bool) (time.Time, error) {
	t := time.Unix(int64(days)*86400, 0).UTC()
	lo, hi, hint, typ := minDate, maxDate, legacyRangeHint, "Date"
	if modern {
		lo, hi, hint, typ = minDate32, maxDate32, modernRangeHint, "Date32"
	}
	if t.Before(lo) || t.After(hi) {
		return time.Time{}, &rangeError{value: t.Format("2006-01-02"), hint: hint,
			reason: fmt.Sprintf("is outside the range of ClickHouse %s (%s to %s)", typ, lo.Format("2006-01-02"), hi.Format("2006-01-02"))}
	}
	return t, nil
}

// timestampValue converts microseconds since 1970 to the time the driver writes. The compatible
// layout's DateTime keeps whole seconds: the fraction is dropped (rounded toward the past).
func timestampValue(us int64, modern bool) (time.Time, error) {
	t := time.UnixMicro(us).UTC()
	lo, hi, hint, typ := minDate, maxDateTime, legacyRangeHint, "DateTime"
	if modern {
		lo, hi, hint, typ = minDate32, maxDateTime64, modernRangeHint, "DateTime64(6)"
	}
	if t.Before(lo) || t.After(hi) {
		return time.Time{}, &rangeError{value: t.Format("2006-01-02 15:04:05.999999"), hint: hint,
			reason: fmt.Sprintf("is outside the range of ClickHouse %s (%s to %s)", typ,
				lo.Format("2006-01-02 15:04:05"), hi.Format("2006-01-02 15:04:05"))}
	}
	if !modern {
		t = t.Truncate(time.Second) // t >= 1970, so truncation rounds toward the past
	}
	return t, nil
}

// formatTime prints microseconds since midnight as Postgres prints a time: HH:MM:SS[.ffffff]
// without trailing zeros in the fraction.
func formatTime(us int64) string {
	s := us / 1e6
	b := fmt.Appendf(nil, "%02d:%02d:%02d", s/3600, s/60%60, s%60)
	return string(appendFraction(b, us%1e6))
}

// appendFraction appends .ffffff without trailing zeros, nothing when frac is zero.
func appendFraction(b []byte, frac int64) []byte {
	if frac == 0 {
		return b
	}
	f := fmt.Sprintf("%06d", frac)
	for f[len(f)-1] == '0' {
		f = f[:len(f)-1]
	}
	return append(append(b, '.'), f...)
}

// formatInterval prints an interval as ISO 8601 (P1Y2M3DT4H5M6.5S; batch.AppendInterval).
func formatInterval(v arrow.MonthDayNanoInterval) string { return string(batch.AppendInterval(nil, v)) }
