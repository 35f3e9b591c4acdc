package batch

import (
	"bytes"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// intervalHint says how to make the source print intervals in a form the mapping reads.
const intervalHint = "the source must run with IntervalStyle=postgres (or iso_8601)"

// parseInterval parses interval text in the postgres style (1 year 2 mons -3 days +04:05:06.5)
// or the iso_8601 style (P1Y2M-3DT4H5M6.5S) into months, days and nanoseconds, the fields
// Postgres keeps (years are 12 months; days and time are not folded into each other).
func parseInterval(v []byte) (arrow.MonthDayNanoInterval, error) {
	var months, days, us int64
	var err error
	if len(v) > 0 && v[0] == 'P' {
		months, days, us, err = parseISOInterval(v)
	} else {
		months, days, us, err = parsePostgresInterval(v)
	}
	if err != nil {
		return arrow.MonthDayNanoInterval{}, err
	}
	if months < math.MinInt32 || months > math.MaxInt32 || days < math.MinInt32 || days > math.MaxInt32 ||
		us < math.MinInt64/1000 || us > math.MaxInt64/1000 {
		return arrow.MonthDayNanoInterval{}, notRepresentable("month_day_nano_interval holds about ±106,751 days "+
			"of time part; split the interval in Postgres into days and time", "interval out of the range of month_day_nano_interval")
	}
	return arrow.MonthDayNanoInterval{Months: int32(months), Days: int32(days), Nanoseconds: us * 1000}, nil
}

// parsePostgresInterval reads the postgres IntervalStyle: "N unit" pairs (year, mon, day, each
// possibly plural) and an optional signed time part H:MM:SS[.ffffff].
func parsePostgresInterval(v []byte) (months, days, us int64, err error) {
	bad := func() (int64, int64, int64, error) {
		return 0, 0, 0, &convError{kind: ErrMalformedValue, reason: "not an interval", hint: intervalHint}
	}
	if len(v) == 0 {
		return bad()
	}
	for i := 0; i < len(v); {
		end := i + bytes.IndexByte(v[i:], ' ')
		if end < i {
			end = len(v)
		}
		tok := v[i:end]
		if bytes.IndexByte(tok, ':') >= 0 {
			sign, k := int64(1), 0
			if tok[0] == '-' || tok[0] == '+' {
				k = 1
				if tok[0] == '-' {
					sign = -1
				}
			}
			t, j, cerr := parseClock(tok, k, 10)
			if cerr != nil || j != len(tok) {
				return bad()
			}
			us += sign * t
			i = end + 1
			continue
		}
		n, perr := parseInt(tok, 64)
		if perr != nil || end >= len(v) {
			return bad()
		}
		uEnd := end + 1 + bytes.IndexByte(v[end+1:], ' ')
		if uEnd <= end {
			uEnd = len(v)
		}
		switch string(v[end+1 : uEnd]) {
		case "year", "years":
			months += n * 12
		case "mon", "mons":
			months += n
		case "day", "days":
			days += n
		default:
			return bad()
		}
		if months < math.MinInt32*12 || months > math.MaxInt32*12 || days < math.MinInt32 || days > math.MaxInt32 {
			return bad()
		}
		i = uEnd + 1
	}
	return months, days, us, nil
}

// parseISOInterval reads the iso_8601 IntervalStyle: P[nY][nM][nW][nD][T[nH][nM][n[.f]S]], each n
// signed.
func parseISOInterval(v []byte) (months, days, us int64, err error) {
	bad := func() (int64, int64, int64, error) {
		return 0, 0, 0, &convError{kind: ErrMalformedValue, reason: "not an ISO 8601 interval", hint: intervalHint}
	}
	inTime := false
	if len(v) < 2 {
		return bad()
	}
	for i := 1; i < len(v); {
		if v[i] == 'T' && !inTime {
			inTime = true
			i++
			continue
		}
		sign := int64(1)
		if v[i] == '-' || v[i] == '+' {
			if v[i] == '-' {
				sign = -1
			}
			i++
		}
		n, j, nd := readUint(v, i)
		if nd == 0 || j >= len(v) {
			return bad()
		}
		var frac int64
		if v[j] == '.' {
			var fd int
			frac, j, fd = readUint(v, j+1)
			if fd < 1 || fd > 6 || j >= len(v) || v[j] != 'S' || !inTime {
				return bad()
			}
			frac *= int64(pow10[6-fd])
		}
		var unit int64 // microseconds per unit of a time designator
		switch d := v[j]; {
		case !inTime && d == 'Y':
			months += sign * n * 12
		case !inTime && d == 'M':
			months += sign * n
		case !inTime && d == 'W':
			days += sign * n * 7
		case !inTime && d == 'D':
			days += sign * n
		case inTime && d == 'H':
			unit = 3600_000_000
		case inTime && d == 'M':
			unit = 60_000_000
		case inTime && d == 'S':
			unit = 1_000_000
		default:
			return bad()
		}
		if unit != 0 {
			t, ok := mulAdd(n, unit, frac)
			if !ok {
				return bad()
			}
			us += sign * t
		}
		if n > math.MaxInt32*12 {
			return bad()
		}
		i = j + 1
	}
	return months, days, us, nil
}

// AppendInterval writes an interval as an ISO 8601 duration the way Postgres' iso_8601 style
// prints it: P1Y2M3DT4H5M6.5S, each component with its own sign (P1Y2M-3DT4H5M6.5S), PT0S for
// zero, the seconds' fraction in microseconds without trailing zeros. Sinks without an interval
// type store this text.
func AppendInterval(dst []byte, v arrow.MonthDayNanoInterval) []byte {
	dst = append(dst, 'P')
	unit := func(n int64, u byte) {
		if n != 0 {
			dst = strconv.AppendInt(dst, n, 10)
			dst = append(dst, u)
		}
	}
	unit(int64(v.Months/12), 'Y')
	unit(int64(v.Months%12), 'M')
	unit(int64(v.Days), 'D')
	ns := v.Nanoseconds
	if ns == 0 {
		if v.Months == 0 && v.Days == 0 {
			dst = append(dst, "T0S"...)
		}
		return dst
	}
	dst = append(dst, 'T')
	const sec = int64(time.Second)
	unit(ns/(3600*sec), 'H')
	unit(ns/(60*sec)%60, 'M')
	if s, frac := ns/sec%60, ns%sec; s != 0 || frac != 0 {
		if s == 0 && frac < 0 {
			dst = append(dst, '-')
		}
		dst = strconv.AppendInt(dst, s, 10)
		if us := max(frac, -frac) / 1000; us != 0 {
			digits := 6
			for us%10 == 0 {
				us /= 10
				digits--
			}
			dst = append(dst, '.')
			s := strconv.FormatInt(us, 10)
			for range digits - len(s) {
				dst = append(dst, '0')
			}
			dst = append(dst, s...)
		}
		dst = append(dst, 'S')
	}
	return dst
}
