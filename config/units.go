package config

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ByteSize is a size in bytes. In a config it is an integer number of bytes or a number with a
// unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), for example
// 64MiB. It encodes to JSON as an integer number of bytes.
type ByteSize int64

// Common sizes.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
)

// byteUnits maps a lower-cased unit to its multiplier.
func byteUnit(unit string) (int64, bool) {
	switch strings.ToLower(unit) {
	case "", "b":
		return 1, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	case "tb":
		return 1e12, true
	case "kib":
		return 1 << 10, true
	case "mib":
		return 1 << 20, true
	case "gib":
		return 1 << 30, true
	case "tib":
		return 1 << 40, true
	}
	return 0, false
}

const sizeHint = "write a number of bytes or a number with a unit, such as 64MiB, 64MB, 512KiB or 1GiB"

// ParseByteSize parses a size such as 64MiB, 64MB, "1.5 GiB" or 1048576.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	mult, ok := byteUnit(unit)
	if num == "" || !ok {
		return 0, fmt.Errorf("cannot read %q as a size; %s", s, sizeHint)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q is out of range", s)
		}
		return ByteSize(n * mult), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot read %q as a size; %s", s, sizeHint)
	}
	v := f * float64(mult)
	if v != math.Trunc(v) || v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return ByteSize(v), nil
}

// String formats the size with the largest binary unit that divides it exactly: 64MiB, 1000B.
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		n    ByteSize
	}{{"TiB", 1 << 40}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if b != 0 && b%u.n == 0 {
			return strconv.FormatInt(int64(b/u.n), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// decodeRaw reads a size from a decoded YAML or JSON value: an integer or a string.
func (b *ByteSize) decodeRaw(v any) error {
	if s, ok := v.(string); ok {
		n, err := ParseByteSize(s)
		if err != nil {
			return err
		}
		*b = n
		return nil
	}
	n, err := rawInt(v)
	if err != nil {
		return fmt.Errorf("want a size; %s", sizeHint)
	}
	*b = ByteSize(n)
	return nil
}

// MarshalJSON encodes the size as an integer number of bytes.
func (b ByteSize) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, int64(b), 10), nil
}

// UnmarshalJSON accepts an integer number of bytes or a string with a unit.
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	v, err := decodeJSONValue(data)
	if err != nil {
		return err
	}
	return b.decodeRaw(v)
}

// Duration is a time span written as Go writes durations: 500ms, 1s, 2m30s, 1h. A bare number
// is rejected, since its unit would be a guess. It encodes to JSON as such a string.
type Duration time.Duration

const durationHint = "write a number with a unit, such as 500ms, 1s, 2m or 1h"

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats the duration as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// decodeRaw reads a duration from a decoded YAML or JSON value; only strings are accepted.
func (d *Duration) decodeRaw(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("want a duration; %s", durationHint)
	}
	p, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("cannot read %q as a duration; %s", s, durationHint)
	}
	*d = Duration(p)
	return nil
}

// MarshalJSON encodes the duration as a string such as "1s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON accepts a duration string such as "1s".
func (d *Duration) UnmarshalJSON(data []byte) error {
	v, err := decodeJSONValue(data)
	if err != nil {
		return err
	}
	return d.decodeRaw(v)
}
