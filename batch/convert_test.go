package batch

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// typmod returns the atttypmod of numeric(p,s).
func typmod(p, s int32) int32 { return (p<<16 | s&0x7ff) + 4 }

// day returns the date32 of a proleptic Gregorian date with an astronomical year.
func day(y, m, d int) arrow.Date32 {
	return arrow.Date32(time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

// micros returns the timestamp of an instant (astronomical year) in UTC.
func micros(y, m, d, hh, mm, ss, us int) arrow.Timestamp {
	t := time.Date(y, time.Month(m), d, hh, mm, ss, us*1000, time.UTC)
	return arrow.Timestamp(t.Unix()*1_000_000 + int64(t.Nanosecond()/1000))
}

func decNum(s string, p, sc int32) decimal128.Num {
	n, err := decimal128.FromString(s, p, sc)
	if err != nil {
		panic(err)
	}
	return n
}

func TestConvertScalars(t *testing.T) {
	t.Parallel()
	int2 := Column{Name: "c", TypeOID: oidInt2, TypeName: "smallint"}
	int4 := Column{Name: "c", TypeOID: oidInt4, TypeName: "integer"}
	int8 := Column{Name: "c", TypeOID: oidInt8, TypeName: "bigint"}
	f4 := Column{Name: "c", TypeOID: oidFloat4, TypeName: "real"}
	f8 := Column{Name: "c", TypeOID: oidFloat8, TypeName: "double precision"}
	num := func(p, s int32) Column {
		return Column{Name: "price", TypeOID: oidNumeric, TypeName: "numeric", TypeMod: typmod(p, s)}
	}
	cases := []struct {
		name string
		col  Column
		in   []Value
		want []any
	}{
		{"int2 limits and null", int2, []Value{txt("-32768"), txt("32767"), null, txt("0")}, []any{int16(-32768), int16(32767), nil, int16(0)}},
		{"int4 limits", int4, []Value{txt("-2147483648"), txt("2147483647")}, []any{int32(math.MinInt32), int32(math.MaxInt32)}},
		{"int8 limits", int8, []Value{txt("-9223372036854775808"), txt("9223372036854775807")}, []any{int64(math.MinInt64), int64(math.MaxInt64)}},
		{"float4 specials", f4, []Value{txt("NaN"), txt("Infinity"), txt("-Infinity"), txt("0.1"), txt("1.5e-07"), txt("-0")},
			[]any{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(0.1), float32(1.5e-7), float32(math.Copysign(0, -1))}},
		{"float8 specials", f8, []Value{txt("NaN"), txt("Infinity"), txt("-Infinity"), txt("1e+30"), null},
			[]any{math.NaN(), math.Inf(1), math.Inf(-1), 1e30, nil}},
		{"numeric(10,2)", num(10, 2), []Value{txt("123.45"), txt("-0.01"), txt("0"), txt("99999999.99"), txt("1.5"), txt("-1.50"), null},
			[]any{decNum("123.45", 10, 2), decNum("-0.01", 10, 2), decNum("0", 10, 2), decNum("99999999.99", 10, 2), decNum("1.50", 10, 2), decNum("-1.5", 10, 2), nil}},
		{"numeric(38,0) 38 digits", num(38, 0), []Value{txt(strings.Repeat("9", 38)), txt("-" + strings.Repeat("9", 38))},
			[]any{decimal128.GetMaxValue(38), decimal128.GetMaxValue(38).Negate()}},
		{"numeric(38,38)", num(38, 38), []Value{txt("-0.00000000000000000000000000000000000001"), txt("0." + strings.Repeat("9", 38))},
			[]any{decimal128.FromI64(-1), decimal128.GetMaxValue(38)}},
		{"numeric(38,10) many chunks", num(38, 10), []Value{txt("1234567890123456789012345678.0123456789")},
			[]any{decNum("1234567890123456789012345678.0123456789", 38, 10)}},
		{"numeric(5,-2) negative scale", num(5, -2), []Value{txt("12300"), txt("-9999900")}, []any{decimal128.FromI64(12300), decimal128.FromI64(-9999900)}},
		{"numeric(2,5) scale above precision", num(2, 5), []Value{txt("0.00012"), txt("-0.00099")}, []any{decimal128.FromI64(12), decimal128.FromI64(-99)}},
		{"unconstrained numeric is exact text", Column{Name: "c", TypeOID: oidNumeric, TypeMod: -1},
			[]Value{txt("NaN"), txt("Infinity"), txt("-Infinity"), txt("123456789012345678901234567890123456789012.5"), null},
			[]any{"NaN", "Infinity", "-Infinity", "123456789012345678901234567890123456789012.5", nil}},
		{"numeric(39,2) is exact text", num(39, 2), []Value{txt("1.50")}, []any{"1.50"}},
		{"bool", Column{Name: "c", TypeOID: oidBool}, []Value{txt("t"), txt("f"), null}, []any{true, false, nil}},
		{"text non-ASCII and empty", Column{Name: "c", TypeOID: oidText}, []Value{txt("ü€😀"), txt(""), null, txt("a\tb\nc")}, []any{"ü€😀", "", nil, "a\tb\nc"}},
		{"bpchar keeps padding", Column{Name: "c", TypeOID: oidBPChar, TypeMod: 10}, []Value{txt("abc   ")}, []any{"abc   "}},
		{"varchar and name", Column{Name: "c", TypeOID: oidVarchar}, []Value{txt("x")}, []any{"x"}},
		{"json jsonb inet cidr as text", Column{Name: "c", TypeOID: oidJSONB}, []Value{txt(`{"a": 1}`)}, []any{`{"a": 1}`}},
		{"inet", Column{Name: "c", TypeOID: oidInet}, []Value{txt("::1"), txt("10.0.0.1/8")}, []any{"::1", "10.0.0.1/8"}},
		{"enum by category", Column{Name: "c", TypeOID: 91234, TypeName: "mood", Category: "E"}, []Value{txt("happy")}, []any{"happy"}},
		{"bytea hex and escape", Column{Name: "c", TypeOID: oidBytea}, []Value{txt(`\x00ff41`), txt(`\x`), txt(`\000\377A\\`), null},
			[]any{[]byte{0, 0xff, 0x41}, []byte{}, []byte{0, 0xff, 'A', '\\'}, nil}},
		{"date", Column{Name: "c", TypeOID: oidDate}, []Value{
			txt("1970-01-01"), txt("1969-12-31"), txt("2000-02-29"), txt("2038-01-20"), txt("2100-01-01"),
			txt("0044-03-15 BC"), txt("0001-01-01 BC"), txt("4713-01-01 BC"), txt("5874897-12-31"), txt("0001-01-01"), null},
			[]any{arrow.Date32(0), arrow.Date32(-1), day(2000, 2, 29), day(2038, 1, 20), day(2100, 1, 1),
				day(-43, 3, 15), day(0, 1, 1), day(-4712, 1, 1), day(5874897, 12, 31), day(1, 1, 1), nil}},
		{"time", Column{Name: "c", TypeOID: oidTime}, []Value{txt("00:00:00"), txt("23:59:59.999999"), txt("12:34:56.5")},
			[]any{arrow.Time64(0), arrow.Time64(86399999999), arrow.Time64((12*3600+34*60+56)*1_000_000 + 500000)}},
		{"timestamp", Column{Name: "c", TypeOID: oidTimestamp}, []Value{
			txt("1970-01-01 00:00:00"), txt("1969-12-31 23:59:59.999999"), txt("2038-01-19 03:14:08"), txt("2262-04-12 00:00:00.000001"),
			txt("0044-03-15 12:00:00.5 BC"), txt("1900-01-01 00:00:00"), txt("294247-01-10 04:00:54.775807"), txt("4713-01-01 00:00:00 BC")},
			[]any{arrow.Timestamp(0), arrow.Timestamp(-1), arrow.Timestamp(int64(1<<31) * 1_000_000), micros(2262, 4, 12, 0, 0, 0, 1),
				micros(-43, 3, 15, 12, 0, 0, 500000), micros(1900, 1, 1, 0, 0, 0, 0), arrow.Timestamp(math.MaxInt64), micros(-4712, 1, 1, 0, 0, 0, 0)}},
		{"timestamptz offsets", Column{Name: "c", TypeOID: oidTimestamptz}, []Value{
			txt("2099-12-31 19:32:03.000001+00"), txt("2100-01-01 01:02:03+05:30"), txt("1800-01-01 00:00:00+05:53:28"),
			txt("1969-12-31 21:00:00-03"), txt("0044-03-15 12:00:00+00 BC")},
			[]any{micros(2099, 12, 31, 19, 32, 3, 1), micros(2099, 12, 31, 19, 32, 3, 0), micros(1799, 12, 31, 18, 6, 32, 0),
				arrow.Timestamp(0), micros(-43, 3, 15, 12, 0, 0, 0)}},
		{"uuid", Column{Name: "c", TypeOID: oidUUID}, []Value{txt("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), null},
			[]any{[16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}, nil}},
		{"interval postgres style", Column{Name: "c", TypeOID: oidInterval}, []Value{
			txt("1 year 2 mons 3 days 04:05:06.789"), txt("-1 years -2 mons +3 days -04:00:00"), txt("-1 days"), txt("00:00:00"),
			txt("100:00:00.000001"), txt("-00:00:00.5"), txt("1 mon -1 days +00:00:00.000001"), txt("1 year")},
			[]any{mdn(14, 3, (4*3600+5*60+6)*1e9+789e6), mdn(-14, 3, -4*3600e9), mdn(0, -1, 0), mdn(0, 0, 0),
				mdn(0, 0, 100*3600e9+1000), mdn(0, 0, -5e8), mdn(1, -1, 1000), mdn(12, 0, 0)}},
		{"interval iso_8601 style", Column{Name: "c", TypeOID: oidInterval}, []Value{
			txt("P1Y2M3DT4H5M6.789S"), txt("P-1Y-2M3DT-4H"), txt("PT0S"), txt("PT-0.5S")},
			[]any{mdn(14, 3, (4*3600+5*60+6)*1e9+789e6), mdn(-14, 3, -4*3600e9), mdn(0, 0, 0), mdn(0, 0, -5e8)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := buildColumn(t, tc.col, tc.in...)
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			if !sameValues(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

func mdn(months, days int32, nanos float64) arrow.MonthDayNanoInterval {
	return arrow.MonthDayNanoInterval{Months: months, Days: days, Nanoseconds: int64(nanos)}
}

func TestConvertErrors(t *testing.T) {
	t.Parallel()
	price := Column{Name: "price", TypeOID: oidNumeric, TypeName: "numeric(12,2)", TypeMod: typmod(12, 2)}
	cases := []struct {
		name     string
		col      Column
		in       Value
		kind     error
		contains []string
	}{
		{"numeric NaN", price, txt("NaN"), ErrNotRepresentable, []string{"shop.orders", `"price"`, "numeric(12,2)", `"NaN"`, "decimal128(12,2)", "unconstrained numeric"}},
		{"numeric Infinity", price, txt("Infinity"), ErrNotRepresentable, []string{`"Infinity"`}},
		{"numeric -Infinity", price, txt("-Infinity"), ErrNotRepresentable, []string{`"-Infinity"`}},
		{"numeric too many digits", price, txt("12345678901.00"), ErrMalformedValue, []string{"12 significant digits"}},
		{"numeric extra fraction", price, txt("1.234"), ErrMalformedValue, []string{"after the point"}},
		{"int2 overflow", Column{Name: "n", TypeOID: oidInt2, TypeName: "smallint"}, txt("32768"), ErrMalformedValue, []string{"out of range"}},
		{"int8 overflow", Column{Name: "n", TypeOID: oidInt8}, txt("9223372036854775808"), ErrMalformedValue, []string{"out of range"}},
		{"int garbage", Column{Name: "n", TypeOID: oidInt4}, txt("12a"), ErrMalformedValue, []string{"not an integer"}},
		{"date infinity", Column{Name: "d", TypeOID: oidDate, TypeName: "date"}, txt("infinity"), ErrNotRepresentable, []string{`"d"`, "infinity", "9999-12-31"}},
		{"timestamp -infinity", Column{Name: "ts", TypeOID: oidTimestamp}, txt("-infinity"), ErrNotRepresentable, []string{"-infinity"}},
		{"timestamptz infinity", Column{Name: "ts", TypeOID: oidTimestamptz}, txt("infinity"), ErrNotRepresentable, []string{"infinity"}},
		{"date not ISO", Column{Name: "d", TypeOID: oidDate}, txt("01/02/2024"), ErrMalformedValue, []string{"ISO"}},
		{"date Feb 30", Column{Name: "d", TypeOID: oidDate}, txt("2023-02-29"), ErrMalformedValue, []string{"day out of range"}},
		{"time 24:00", Column{Name: "t", TypeOID: oidTime}, txt("24:00:00"), ErrNotRepresentable, []string{"24:00:00"}},
		{"timestamp past int64 micros", Column{Name: "ts", TypeOID: oidTimestamp}, txt("294247-01-10 04:00:54.775808"), ErrNotRepresentable, []string{"out of the range"}},
		{"timestamp at Postgres' maximum", Column{Name: "ts", TypeOID: oidTimestamp}, txt("294276-12-31 23:59:59.999999"), ErrNotRepresentable, []string{"out of the range"}},
		{"timestamptz without offset", Column{Name: "ts", TypeOID: oidTimestamptz}, txt("2024-01-01 00:00:00"), ErrMalformedValue, []string{"offset"}},
		{"interval verbose style", Column{Name: "iv", TypeOID: oidInterval}, txt("@ 1 year ago"), ErrMalformedValue, []string{"IntervalStyle"}},
		{"bytea odd hex", Column{Name: "b", TypeOID: oidBytea}, txt(`\x0`), ErrMalformedValue, []string{"hex"}},
		{"uuid short", Column{Name: "u", TypeOID: oidUUID}, txt("a0eebc99"), ErrMalformedValue, []string{"uuid"}},
		{"bool", Column{Name: "b", TypeOID: oidBool}, txt("yes"), ErrMalformedValue, []string{"boolean"}},
		{"unchanged toast", Column{Name: "doc", TypeOID: oidText}, Value{Unchanged: true}, ErrUnresolvedTOAST, []string{`"doc"`, "TOAST"}},
		{"null key", Column{Name: "id", TypeOID: oidInt8, Key: true}, null, ErrMalformedValue, []string{`"id"`, "NULL key"}},
		{"multi-dimensional array", Column{Name: "m", TypeOID: 1007, TypeName: "integer[]"}, txt("{{1,2},{3,4}}"), ErrNotRepresentable, []string{`"m"`, "multi-dimensional", "TYPE int[][]"}},
		{"multi-dimensional decoration", Column{Name: "m", TypeOID: 1007}, txt("[1:1][1:2]={{1,2}}"), ErrNotRepresentable, []string{"multi-dimensional"}},
		// A list cannot keep another lower bound: never dropped silently.
		{"array lower bound 0", Column{Name: "a", TypeOID: 1007, TypeName: "integer[]"}, txt("[0:2]={1,2,3}"), ErrNotRepresentable,
			[]string{`"a"`, `"[0:2]={1,2,3}"`, "lower bound 0 ([0:2])", "array_lower(c, 1)", "TYPE int[][]", "resync"}},
		{"array lower bound 2", Column{Name: "a", TypeOID: 1009}, txt("[2:3]={x,y}"), ErrNotRepresentable, []string{"lower bound 2"}},
		{"array negative lower bound", Column{Name: "a", TypeOID: 1007}, txt("[-3:-2]={1,2}"), ErrNotRepresentable, []string{"lower bound -3"}},
		{"array decoration without bounds", Column{Name: "a", TypeOID: 1007}, txt("[]={1,2}"), ErrMalformedValue, []string{"decoration"}},
		{"array decoration not numeric", Column{Name: "a", TypeOID: 1007}, txt("[a:b]={1,2}"), ErrMalformedValue, []string{"decoration"}},
		{"array NaN in decimal element", Column{Name: "a", TypeOID: 1231, TypeName: "numeric(5,1)[]", TypeMod: typmod(5, 1)}, txt("{1.5,NaN}"), ErrNotRepresentable, []string{"element 2", `"NaN"`}},
		{"array unterminated", Column{Name: "a", TypeOID: 1009}, txt(`{"a`), ErrMalformedValue, []string{"unterminated"}},
		{"array empty element", Column{Name: "a", TypeOID: 1007}, txt(`{1,,2}`), ErrMalformedValue, []string{"empty"}},
		{"array trailing text", Column{Name: "a", TypeOID: 1007}, txt(`{1} x`), ErrMalformedValue, []string{"after the end"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := buildColumn(t, tc.col, tc.in)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %v is not %v", err, tc.kind)
			}
			var ve *ValueError
			if !errors.As(err, &ve) {
				t.Errorf("error %v is not a *ValueError", err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestConvertLargeBytea(t *testing.T) {
	t.Parallel()
	raw := bytes.Repeat([]byte{0x00, 0x7f, 0xff, 0x10, 0xab}, 1<<20) // 5 MiB
	hexText := make([]byte, 0, 2+2*len(raw))
	hexText = append(hexText, `\x`...)
	for _, b := range raw {
		hexText = append(hexText, "0123456789abcdef"[b>>4], "0123456789abcdef"[b&15])
	}
	got, err := buildColumn(t, Column{Name: "blob", TypeOID: oidBytea}, Value{Text: hexText}, null, Value{Text: hexText})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		if !bytes.Equal(got[i].([]byte), raw) {
			t.Errorf("row %d: bytea of %d bytes differs", i, len(raw))
		}
	}
	if got[1] != nil {
		t.Errorf("row 1: got %v, want NULL", got[1])
	}
}

func TestValueErrorShortensValue(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 100) // 200 bytes
	_, err := buildColumn(t, Column{Name: "u", TypeOID: oidUUID, TypeName: "uuid"}, txt(long))
	var ve *ValueError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a ValueError", err)
	}
	if len(ve.Value) > 80 || !strings.Contains(ve.Value, "(200 bytes)") || !strings.HasPrefix(ve.Value, "éé") {
		t.Errorf("value not shortened at a rune boundary: %q", ve.Value)
	}
}
