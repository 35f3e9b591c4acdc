package batch

import (
	"math"
	"math/bits"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// The parsers below read the text output of Postgres with the session settings the source uses:
// DateStyle=ISO, IntervalStyle=postgres (iso_8601 is read too), bytea_output=hex (escape is read
// too), TimeZone=UTC (other offsets are applied), extra_float_digits>=1, client_encoding=UTF8.
// They do not allocate on success.

// parseInt parses a decimal integer that fits in bitSize bits.
func parseInt(v []byte, bitSize uint) (int64, error) {
	if len(v) == 0 {
		return 0, malformed("empty integer")
	}
	neg := false
	i := 0
	if v[0] == '-' || v[0] == '+' {
		neg = v[0] == '-'
		i = 1
	}
	if i == len(v) {
		return 0, malformed("not an integer")
	}
	limit := uint64(1) << (bitSize - 1) // magnitude of the minimum
	var n uint64
	for ; i < len(v); i++ {
		c := v[i] - '0'
		if c > 9 {
			return 0, malformed("not an integer")
		}
		if n > (limit)/10+1 {
			return 0, malformed("integer out of range for %d bits", bitSize)
		}
		n = n*10 + uint64(c)
	}
	if (!neg && n >= limit) || (neg && n > limit) {
		return 0, malformed("integer out of range for %d bits", bitSize)
	}
	if neg {
		return -int64(n), nil
	}
	return int64(n), nil
}

// parseOID parses an oid: an unsigned decimal of at most 32 bits.
func parseOID(v []byte) (int64, error) {
	if len(v) == 0 || len(v) > 10 {
		return 0, malformed("not an oid")
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, malformed("not an oid")
		}
		n = n*10 + int64(c-'0')
	}
	if n > math.MaxUint32 {
		return 0, malformed("oid out of range for 32 bits")
	}
	return n, nil
}

// parseFloat parses float4/float8 text, including NaN, Infinity and -Infinity.
func parseFloat(v []byte, bitSize int) (float64, error) {
	f, err := strconv.ParseFloat(string(v), bitSize)
	if err != nil {
		return 0, malformed("not a float%d", bitSize/8)
	}
	return f, nil
}

// parseBool parses t/f (and true/false).
func parseBool(v []byte) (bool, error) {
	switch string(v) {
	case "t", "true":
		return true, nil
	case "f", "false":
		return false, nil
	}
	return false, malformed("not a boolean")
}

// decimalHint says what to do with a numeric value a decimal128 column cannot hold.
const decimalHint = "decimal128 has no NaN or infinity; fix the row in Postgres, or declare the column " +
	"as unconstrained numeric so it is carried as exact text"

// pow10 holds 10^0 .. 10^18.
var pow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// parseDecimal parses numeric text into a decimal128 of the given precision and scale exactly.
// Fewer fractional digits than scale are padded; extra fractional digits must be zeros.
func parseDecimal(v []byte, precision, scale int32) (decimal128.Num, error) {
	switch string(v) {
	case "NaN", "Infinity", "-Infinity":
		return decimal128.Num{}, notRepresentable(decimalHint, "%s does not fit decimal128(%d,%d)", v, precision, scale)
	}
	i, neg := 0, false
	if len(v) > 0 && (v[0] == '-' || v[0] == '+') {
		neg, i = v[0] == '-', 1
	}
	// The unscaled value N = value*10^scale is accumulated in (hi,lo) in chunks of up to 18
	// digits; sig counts its digits from the first non-zero one, so N < 10^38 < 2^127 holds
	// while sig <= precision.
	var d dec
	seenDigit, seenPoint := false, false
	frac := int32(0)
	for ; i < len(v); i++ {
		c := v[i]
		if c == '.' && !seenPoint {
			seenPoint = true
			continue
		}
		digit := c - '0'
		if digit > 9 {
			return decimal128.Num{}, malformed("not a decimal number")
		}
		seenDigit = true
		if seenPoint {
			if frac == scale {
				if digit != 0 {
					return decimal128.Num{}, malformed("more than %d digits after the point for decimal128(%d,%d)", scale, precision, scale)
				}
				continue
			}
			frac++
		}
		d.add(digit)
	}
	if !seenDigit {
		return decimal128.Num{}, malformed("not a decimal number")
	}
	for ; frac < scale; frac++ {
		d.add(0)
	}
	if d.sig > precision {
		return decimal128.Num{}, malformed("more than %d significant digits for decimal128(%d,%d)", precision, precision, scale)
	}
	d.flush()
	n := decimal128.New(int64(d.hi), d.lo)
	if neg {
		n = n.Negate()
	}
	return n, nil
}

// dec accumulates the digits of an unsigned 128-bit decimal.
type dec struct {
	hi, lo   uint64
	chunk    uint64
	chunkLen int
	sig      int32
}

func (d *dec) add(digit byte) {
	if d.sig == 0 && digit == 0 {
		return // leading zero
	}
	d.sig++
	if d.sig > maxDecimal128Precision {
		return // too many digits: the caller reports it
	}
	d.chunk = d.chunk*10 + uint64(digit)
	d.chunkLen++
	if d.chunkLen == 18 {
		d.flush()
	}
}

// flush sets (hi,lo) = (hi,lo)*10^chunkLen + chunk.
func (d *dec) flush() {
	m := pow10[d.chunkLen]
	h1, l1 := bits.Mul64(d.lo, m)
	_, l2 := bits.Mul64(d.hi, m) // the low word of hi*m
	var c uint64
	d.lo, c = bits.Add64(l1, d.chunk, 0)
	d.hi = h1 + l2 + c
	d.chunk, d.chunkLen = 0, 0
}

// parseBytea parses bytea text: hex (\x0aff) or the escape format (\\, \ooo, other bytes as is).
// It appends the bytes to dst.
func parseBytea(dst, v []byte) ([]byte, error) {
	if len(v) >= 2 && v[0] == '\\' && v[1] == 'x' {
		h := v[2:]
		if len(h)%2 != 0 {
			return dst, malformed("odd number of hex digits in bytea")
		}
		for i := 0; i < len(h); i += 2 {
			a, b := unhex(h[i]), unhex(h[i+1])
			if a > 15 || b > 15 {
				return dst, malformed("invalid hex digit in bytea")
			}
			dst = append(dst, a<<4|b)
		}
		return dst, nil
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		if i+1 < len(v) && v[i+1] == '\\' {
			dst = append(dst, '\\')
			i++
			continue
		}
		if i+3 < len(v) && isOctal(v[i+1]) && isOctal(v[i+2]) && isOctal(v[i+3]) && v[i+1] <= '3' {
			dst = append(dst, (v[i+1]-'0')<<6|(v[i+2]-'0')<<3|(v[i+3]-'0'))
			i += 3
			continue
		}
		return dst, malformed("invalid escape in bytea")
	}
	return dst, nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 255
}

// parseUUID parses the canonical 8-4-4-4-12 form (and the 32-digit form without dashes).
func parseUUID(v []byte) (u [16]byte, err error) {
	j := 0
	for i := 0; i < len(v); {
		if v[i] == '-' {
			i++
			continue
		}
		if i+1 >= len(v) || j == 16 {
			return u, malformed("not a uuid")
		}
		a, b := unhex(v[i]), unhex(v[i+1])
		if a > 15 || b > 15 {
			return u, malformed("not a uuid")
		}
		u[j] = a<<4 | b
		j++
		i += 2
	}
	if j != 16 {
		return u, malformed("not a uuid")
	}
	return u, nil
}

// infinityHint says what to do with an infinite date or timestamp.
const infinityHint = "Arrow dates and timestamps have no infinity; replace it in Postgres with a real " +
	"date (for example 9999-12-31), or leave the column out of the publication"

// readUint reads an unsigned decimal number at v[i:], returning it, the index after it and the
// number of digits read.
func readUint(v []byte, i int) (n int64, j, nd int) {
	j = i
	for j < len(v) && v[j] >= '0' && v[j] <= '9' && j-i < 18 {
		n = n*10 + int64(v[j]-'0')
		j++
	}
	return n, j, j - i
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian date with an
// astronomical year (1 BC is year 0).
func daysFromCivil(y int64, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// parseDatePart reads YYYY-MM-DD at the start of v and returns the astronomical year, month and
// day and the index after the date. The " BC" suffix is handled by the caller.
func parseDatePart(v []byte) (y, m, d int64, i int, err error) {
	y, i, nd := readUint(v, 0)
	if nd < 4 || i >= len(v) || v[i] != '-' {
		return 0, 0, 0, 0, malformed("not an ISO date")
	}
	m, i, nd = readUint(v, i+1)
	if nd != 2 || i >= len(v) || v[i] != '-' {
		return 0, 0, 0, 0, malformed("not an ISO date")
	}
	d, i, nd = readUint(v, i+1)
	if nd != 2 || m < 1 || m > 12 || d < 1 || d > 31 {
		return 0, 0, 0, 0, malformed("not an ISO date")
	}
	return y, m, d, i, nil
}

// cutBC removes a trailing " BC" and reports whether it was there.
func cutBC(v []byte) ([]byte, bool) {
	if n := len(v); n >= 3 && string(v[n-3:]) == " BC" {
		return v[:n-3], true
	}
	return v, false
}

// civilDays converts a parsed date (year as printed, bc flag) to days since the epoch.
func civilDays(y, m, d int64, bc bool) (int64, error) {
	if bc {
		if y == 0 {
			return 0, malformed("year 0 BC does not exist")
		}
		y = 1 - y
	}
	if d > daysIn(y, m) {
		return 0, malformed("day out of range for the month")
	}
	return daysFromCivil(y, m, d), nil
}

func isInfinity(v []byte) bool {
	return string(v) == "infinity" || string(v) == "-infinity"
}

// parseDate parses an ISO date (with " BC") into days since the epoch.
func parseDate(v []byte) (arrow.Date32, error) {
	if isInfinity(v) {
		return 0, notRepresentable(infinityHint, "date %s has no arrow date32 equivalent", v)
	}
	v, bc := cutBC(v)
	y, m, d, i, err := parseDatePart(v)
	if err != nil {
		return 0, err
	}
	if i != len(v) {
		return 0, malformed("not an ISO date")
	}
	days, err := civilDays(y, m, d, bc)
	if err != nil {
		return 0, err
	}
	if days < math.MinInt32 || days > math.MaxInt32 {
		return 0, notRepresentable("", "date out of the date32 range")
	}
	return arrow.Date32(days), nil
}

// parseClock reads HH:MM:SS[.ffffff] at v[i:] into microseconds, returning the index after it.
// Hours may exceed 23 (intervals); maxHourDigits bounds them.
func parseClock(v []byte, i, maxHourDigits int) (us int64, j int, err error) {
	h, j, nd := readUint(v, i)
	if nd < 1 || nd > maxHourDigits || j >= len(v) || v[j] != ':' {
		return 0, 0, malformed("not a time of day")
	}
	mi, j, nd := readUint(v, j+1)
	if nd != 2 || mi > 59 || j >= len(v) || v[j] != ':' {
		return 0, 0, malformed("not a time of day")
	}
	s, j, nd := readUint(v, j+1)
	if nd != 2 || s > 60 {
		return 0, 0, malformed("not a time of day")
	}
	var frac int64
	if j < len(v) && v[j] == '.' {
		var fd int
		frac, j, fd = readUint(v, j+1)
		if fd < 1 || fd > 6 {
			return 0, 0, malformed("more than 6 fractional digits of seconds")
		}
		frac *= int64(pow10[6-fd])
	}
	hus, ok := mulAdd(h, 3600_000_000, (mi*60+s)*1_000_000+frac)
	if !ok {
		return 0, 0, notRepresentable("", "time out of range")
	}
	return hus, j, nil
}

// mulAdd returns a*b+c and whether it did not overflow int64 (a, b >= 0).
func mulAdd(a, b, c int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return addInt64(int64(lo), c)
}

// addInt64 returns a+b and whether it did not overflow.
func addInt64(a, b int64) (int64, bool) {
	r := a + b
	return r, (b >= 0) == (r >= a)
}

// time24Hint says what to do with the time 24:00:00, which time64 cannot hold.
const time24Hint = "time64 holds up to 23:59:59.999999; replace 24:00:00 in Postgres or change the column's type"

// parseTime parses time (without zone) into microseconds since midnight.
func parseTime(v []byte) (arrow.Time64, error) {
	us, i, err := parseClock(v, 0, 2)
	if err != nil {
		return 0, err
	}
	if i != len(v) {
		return 0, malformed("not a time of day")
	}
	if us >= 86400_000_000 {
		return 0, notRepresentable(time24Hint, "24:00:00 is past the end of an arrow time64 day")
	}
	return arrow.Time64(us), nil
}

// parseTimestamp parses timestamp or, with tz, timestamptz text into microseconds since the
// epoch in UTC.
func parseTimestamp(v []byte, tz bool) (arrow.Timestamp, error) {
	if isInfinity(v) {
		return 0, notRepresentable(infinityHint, "timestamp %s has no arrow timestamp equivalent", v)
	}
	v, bc := cutBC(v)
	y, m, d, i, err := parseDatePart(v)
	if err != nil {
		return 0, err
	}
	if i >= len(v) || v[i] != ' ' {
		return 0, malformed("not an ISO timestamp")
	}
	us, i, err := parseClock(v, i+1, 2)
	if err != nil {
		return 0, err
	}
	var offset int64 // seconds east of UTC
	if tz {
		if offset, i, err = parseOffset(v, i); err != nil {
			return 0, err
		}
	}
	if i != len(v) {
		return 0, malformed("not an ISO timestamp")
	}
	days, err := civilDays(y, m, d, bc)
	if err != nil {
		return 0, err
	}
	const dayUS = 86400_000_000
	t, ok := addInt64(days*dayUS, us-offset*1_000_000) // |days| < 2^32, so days*dayUS fits
	if !ok || days > math.MaxInt64/dayUS || days < math.MinInt64/dayUS {
		return 0, notRepresentable("", "timestamp out of the range of microseconds since 1970 in 64 bits")
	}
	return arrow.Timestamp(t), nil
}

// parseOffset reads a zone offset +HH[:MM[:SS]] at v[i:] into seconds east of UTC.
func parseOffset(v []byte, i int) (int64, int, error) {
	if i >= len(v) || (v[i] != '+' && v[i] != '-') {
		return 0, 0, malformed("timestamptz without a zone offset")
	}
	sign := int64(1)
	if v[i] == '-' {
		sign = -1
	}
	h, j, nd := readUint(v, i+1)
	if nd != 2 {
		return 0, 0, malformed("invalid zone offset")
	}
	secs := h * 3600
	for k := 0; k < 2 && j < len(v) && v[j] == ':'; k++ {
		var n int64
		n, j, nd = readUint(v, j+1)
		if nd != 2 {
			return 0, 0, malformed("invalid zone offset")
		}
		if k == 0 {
			secs += n * 60
		} else {
			secs += n
		}
	}
	return sign * secs, j, nil
}
