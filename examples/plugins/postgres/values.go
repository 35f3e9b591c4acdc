package main

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// textValue is row r of a as Postgres text input (nil for null): the inverse of the Arrow
// mapping of package batch for the types it produces. Types carried as utf8 are already the
// text Postgres printed.
func textValue(a arrow.Array, r int) any {
	if a.IsNull(r) {
		return nil
	}
	switch v := a.(type) {
	case *array.String:
		return v.Value(r)
	case *array.Binary:
		return `\x` + hex.EncodeToString(v.Value(r))
	case *array.Float32:
		return floatText(float64(v.Value(r)), 32)
	case *array.Float64:
		return floatText(v.Value(r), 64)
	case *array.Timestamp:
		unit := v.DataType().(*arrow.TimestampType).Unit
		return v.Value(r).ToTime(unit).UTC().Format("2006-01-02 15:04:05.999999Z07:00")
	case *array.Date32:
		return v.Value(r).ToTime().Format(time.DateOnly)
	case *array.MonthDayNanoInterval:
		iv := v.Value(r)
		return fmt.Sprintf("%d months %d days %d microseconds", iv.Months, iv.Days, iv.Nanoseconds/1000)
	case *array.List:
		return listText(v, r)
	}
	return a.ValueStr(r)
}

func floatText(f float64, bits int) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// arrayEscaper escapes what a quoted element of a Postgres array literal cannot hold as is.
var arrayEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// listText is a Postgres array literal of list row r: {"a","b",NULL}.
func listText(l *array.List, r int) string {
	start, end := l.ValueOffsets(r)
	elems := l.ListValues()
	var b strings.Builder
	b.WriteByte('{')
	for i := start; i < end; i++ {
		if i > start {
			b.WriteByte(',')
		}
		e := textValue(elems, int(i))
		if e == nil {
			b.WriteString("NULL")
			continue
		}
		b.WriteByte('"')
		b.WriteString(arrayEscaper.Replace(e.(string)))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}
