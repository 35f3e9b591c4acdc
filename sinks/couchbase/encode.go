package couchbase

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"

	"github.com/sluicecdc/sluice/batch"
)

// Postgres type OIDs whose text is JSON and is embedded in documents as JSON, not as a string.
const (
	oidJSON       = 114
	oidJSONB      = 3802
	oidJSONArray  = 199
	oidJSONBArray = 3807
)

// isJSONType reports whether a column of this type OID holds JSON text (or arrays of it).
func isJSONType(oid uint32) bool {
	return oid == oidJSON || oid == oidJSONB || oid == oidJSONArray || oid == oidJSONBArray
}

// valueKind says how a value's text is written into JSON.
type valueKind uint8

const (
	kindNumber valueKind = iota // the text is a JSON number or literal (true, false)
	kindString                  // the text is quoted as a JSON string
	kindRaw                     // the text is JSON already (json, jsonb, arrays)
)

// appendText appends the text form of arr[i] (not null) to dst: the exact text of a value as
// documented in the package doc, without JSON quoting. rawJSON marks json/jsonb columns.
func appendText(dst []byte, arr arrow.Array, i int, rawJSON bool) ([]byte, valueKind, error) {
	switch a := arr.(type) {
	case *array.Boolean:
		return strconv.AppendBool(dst, a.Value(i)), kindNumber, nil
	case *array.Int16:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10), kindNumber, nil
	case *array.Int32:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10), kindNumber, nil
	case *array.Int64:
		return strconv.AppendInt(dst, a.Value(i), 10), kindNumber, nil
	case *array.Float32:
		return appendFloat(dst, float64(a.Value(i)), 32)
	case *array.Float64:
		return appendFloat(dst, a.Value(i), 64)
	case *array.Decimal128:
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		return append(dst, a.Value(i).ToString(scale)...), kindString, nil
	case *array.String:
		if rawJSON {
			return append(dst, a.Value(i)...), kindRaw, nil
		}
		return append(dst, a.Value(i)...), kindString, nil
	case *array.Binary:
		return base64.StdEncoding.AppendEncode(dst, a.Value(i)), kindString, nil
	case *array.Date32:
		return appendDate(dst, time.Unix(int64(a.Value(i))*86400, 0).UTC()), kindString, nil
	case *array.Time64:
		return batch.AppendTime(dst, int64(a.Value(i))), kindString, nil
	case *array.Timestamp:
		tt := a.DataType().(*arrow.TimestampType)
		return appendTimestamp(dst, int64(a.Value(i)), tt.Unit, tt.TimeZone != ""), kindString, nil
	case *array.MonthDayNanoInterval:
		return batch.AppendInterval(dst, a.Value(i)), kindString, nil
	case *extensions.UUIDArray:
		return append(dst, a.Value(i).String()...), kindString, nil
	case *array.List:
		return appendList(dst, a, i, rawJSON)
	}
	return dst, 0, fmt.Errorf("no JSON encoding for arrow type %s", arr.DataType())
}

// appendJSONValue appends arr[i] as a JSON value: null, a number, a string or embedded JSON.
func appendJSONValue(dst []byte, arr arrow.Array, i int, rawJSON bool) ([]byte, error) {
	if arr.IsNull(i) {
		return append(dst, "null"...), nil
	}
	start := len(dst)
	dst, k, err := appendText(dst, arr, i, rawJSON)
	if err != nil {
		return dst, err
	}
	switch k {
	case kindString:
		text := string(dst[start:]) // copy: the quoted form is written over it
		return appendJSONString(dst[:start], text), nil
	case kindRaw:
		if !json.Valid(dst[start:]) {
			return dst, fmt.Errorf("value is not valid JSON")
		}
	}
	return dst, nil
}

// appendHstore appends the hstore arr[i] as a JSON object, its pairs in Postgres' order, a NULL
// value as null; a NULL hstore is null.
func appendHstore(dst []byte, arr arrow.Array, i int) ([]byte, error) {
	if arr.IsNull(i) {
		return append(dst, "null"...), nil
	}
	s, ok := arr.(*array.String)
	if !ok {
		return dst, fmt.Errorf("hstore column is %s, want utf8", arr.DataType())
	}
	pairs, err := batch.ParseHstore(s.Value(i))
	if err != nil {
		return dst, err
	}
	dst = append(dst, '{')
	for j, p := range pairs {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendJSONString(dst, p.Key), ':')
		if p.Value == nil {
			dst = append(dst, "null"...)
		} else {
			dst = appendJSONString(dst, *p.Value)
		}
	}
	return append(dst, '}'), nil
}

// appendFloat writes a finite float as a JSON number and NaN and ±Infinity as the strings
// "NaN", "Infinity" and "-Infinity" (JSON has no such numbers), as Postgres prints them.
func appendFloat(dst []byte, f float64, bits int) ([]byte, valueKind, error) {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...), kindString, nil
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...), kindString, nil
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...), kindString, nil
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(dst, f, format, -1, bits), kindNumber, nil
}

// appendList writes a list as a JSON array of its elements.
func appendList(dst []byte, a *array.List, i int, rawJSON bool) ([]byte, valueKind, error) {
	lo, hi := a.ValueOffsets(i)
	values := a.ListValues()
	dst = append(dst, '[')
	for j := lo; j < hi; j++ {
		if j > lo {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendJSONValue(dst, values, int(j), rawJSON); err != nil {
			return dst, 0, fmt.Errorf("array element %d: %w", j-lo+1, err)
		}
	}
	return append(dst, ']'), kindRaw, nil
}

// appendDate writes the date of t as ISO 8601: YYYY-MM-DD, with the astronomical year (1 BC is
// 0000, 2 BC is -0001) and a sign for years outside 0000-9999.
func appendDate(dst []byte, t time.Time) []byte {
	y, m, d := t.Date()
	switch {
	case y < 0:
		dst = append(dst, '-')
		dst = appendPadded(dst, int64(-y), 4)
	case y > 9999:
		dst = append(dst, '+')
		dst = strconv.AppendInt(dst, int64(y), 10)
	default:
		dst = appendPadded(dst, int64(y), 4)
	}
	dst = append(dst, '-')
	dst = appendPadded(dst, int64(m), 2)
	dst = append(dst, '-')
	return appendPadded(dst, int64(d), 2)
}

// appendTimestamp writes a timestamp as ISO 8601: 2026-11-30T12:00:00.5, with a Z when the
// column has a zone (timestamptz, stored in UTC).
func appendTimestamp(dst []byte, v int64, unit arrow.TimeUnit, utc bool) []byte {
	var t time.Time
	switch unit {
	case arrow.Second:
		t = time.Unix(v, 0).UTC()
	case arrow.Millisecond:
		t = time.UnixMilli(v).UTC()
	case arrow.Microsecond:
		t = time.UnixMicro(v).UTC()
	default:
		t = time.Unix(0, v).UTC()
	}
	dst = appendDate(dst, t)
	dst = append(dst, 'T')
	h, m, s := t.Clock()
	dst = batch.AppendTime(dst, (int64(h)*3600+int64(m)*60+int64(s))*1e6+int64(t.Nanosecond()/1000))
	if utc {
		dst = append(dst, 'Z')
	}
	return dst
}

// appendPadded writes a non-negative n with at least width digits.
func appendPadded(dst []byte, n int64, width int) []byte {
	var buf [20]byte
	s := strconv.AppendInt(buf[:0], n, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// appendJSONString writes s as a JSON string. Invalid UTF-8 becomes U+FFFD, as encoding/json
// does.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
