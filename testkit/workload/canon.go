package workload

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Null is the canonical text of NULL.
const Null = "NULL"

// TimestampLayout is the canonical text of timestamp and timestamptz values: UTC, microseconds.
const TimestampLayout = "2006-01-02T15:04:05.000000Z"

// timeLayout is the canonical text of time values.
const timeLayout = "15:04:05.000000"

// Canon returns the canonical text of a value of kind k given in any of the forms the source
// and the sinks print, so equal values compare equal:
//
//   - floats: the shortest text that parses back to the same float32/float64;
//   - numeric: trailing fractional zeros dropped (12.500 and 12.5 are one value);
//   - bool: true or false (1/0 and t/f accepted);
//   - time: HH:MM:SS.ffffff; timestamps: TimestampLayout in UTC (a zone-less text is UTC);
//   - uuid: lower case; bytea: lower-case hex without \x;
//   - json and arrays: compact JSON with object keys sorted and numbers as written.
//
// A text that does not parse as its kind is returned as it is, so it shows as a difference.
func Canon(k Kind, v string) string {
	if v == Null {
		return v
	}
	switch k {
	case Float4, Float8:
		bits := 64
		if k == Float4 {
			bits = 32
		}
		f, err := strconv.ParseFloat(v, bits)
		if err != nil {
			return v
		}
		return strconv.FormatFloat(f, 'g', -1, bits)
	case Numeric, NumericText:
		if i := strings.IndexByte(v, '.'); i >= 0 && !strings.ContainsAny(v, "eE") {
			v = strings.TrimRight(strings.TrimRight(v, "0"), ".")
			if v == "-0" {
				v = "0"
			}
		}
		return v
	case Bool:
		switch strings.ToLower(v) {
		case "1", "t", "true":
			return "true"
		case "0", "f", "false":
			return "false"
		}
		return v
	case Time:
		if t, err := time.Parse("15:04:05.999999999", v); err == nil {
			return t.Format(timeLayout)
		}
		return v
	case Timestamp, Timestamptz:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00",
			"2006-01-02 15:04:05.999999999Z07", "2006-01-02 15:04:05.999999999"} {
			if t, err := time.Parse(layout, v); err == nil {
				return t.UTC().Format(TimestampLayout)
			}
		}
		return v
	case UUID:
		return strings.ToLower(v)
	case Bytea:
		return strings.ToLower(strings.TrimPrefix(v, `\x`))
	case JSON, Int4Array, TextArray, IntervalArray:
		return canonJSON(v)
	}
	return v
}

// canonJSON re-encodes a JSON text compactly with sorted object keys, keeping numbers as written.
func canonJSON(v string) string {
	d := json.NewDecoder(strings.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return v
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(x); err != nil {
		return v
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// TruncateToSecond maps a canonical timestamp to whole seconds (for sinks that keep seconds).
func TruncateToSecond(v string) string {
	if v == Null || len(v) != len(TimestampLayout) {
		return v
	}
	return v[:len("2006-01-02T15:04:05")] + ".000000Z"
}
