package clickhouse

import (
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
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

// withRow records the row of a conversion error.
func withRow(err error, row int) error {
	if re, ok := err.(*rangeError); ok {
		re.row = row
		return re
	}
	return &rangeError{row: row, value: "", reason: err.Error()}
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

// dateBounds returns the days since 1970 that the date type of the layout holds (dateValue).
func dateBounds(modern bool) (lo, hi int64) {
	if modern {
		return minDate32.Unix() / 86400, maxDate32.Unix() / 86400
	}
	return minDate.Unix() / 86400, maxDate.Unix() / 86400
}

// timestampBounds returns the microseconds since 1970 that the timestamp type of the layout
// holds (timestampValue).
func timestampBounds(modern bool) (lo, hi int64) {
	if modern {
		return minDate32.UnixMicro(), maxDateTime64.UnixMicro()
	}
	return minDate.UnixMicro(), maxDateTime.UnixMicro()
}
