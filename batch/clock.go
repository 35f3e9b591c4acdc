package batch

import "strconv"

// AppendTime appends a time of day, given in microseconds since midnight, as Postgres prints a
// time: HH:MM:SS, then the fraction of the second when it is not zero (up to 6 digits, trailing
// zeros removed). 24:00:00 is a valid time and prints as such.
func AppendTime(dst []byte, us int64) []byte {
	s := us / 1e6
	dst = append2(dst, s/3600)
	dst = append2(append(dst, ':'), s/60%60)
	dst = append2(append(dst, ':'), s%60)
	frac := us % 1e6
	if frac == 0 {
		return dst
	}
	var digits [6]byte
	for k := 5; k >= 0; k-- {
		digits[k] = byte('0' + frac%10)
		frac /= 10
	}
	n := 6
	for digits[n-1] == '0' {
		n--
	}
	return append(append(dst, '.'), digits[:n]...)
}

// append2 appends v with at least two digits.
func append2(dst []byte, v int64) []byte {
	if v < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, v, 10)
}
