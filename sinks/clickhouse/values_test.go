package clickhouse

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func day(y int, m time.Month, d int) arrow.Date32 {
	return arrow.Date32(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

func TestDateValueNeverClamps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		days   arrow.Date32
		modern bool
		err    string
	}{
		{"1967 on Date", day(1967, 5, 1), false, "outside the range of ClickHouse Date (1970-01-01 to 2149-06-06)"},
		{"1970 on Date", day(1970, 1, 1), false, ""},
		{"2149-06-06 on Date", day(2149, 6, 6), false, ""},
		{"2149-06-07 on Date", day(2149, 6, 7), false, "outside the range"},
		{"1967 on Date32", day(1967, 5, 1), true, ""},
		{"1899 on Date32", day(1899, 12, 31), true, "outside the range of ClickHouse Date32"},
		{"2299-12-31 on Date32", day(2299, 12, 31), true, ""},
		{"2300 on Date32", day(2300, 1, 1), true, "outside the range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := dateValue(tc.days, tc.modern)
			if tc.err != "" {
				var re *rangeError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want range error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got.Unix()/86400 != int64(tc.days) {
				t.Fatalf("got %v, %v; want day %d", got, err, tc.days)
			}
		})
	}
}

func TestTimestampValue(t *testing.T) {
	t.Parallel()
	us := func(s string) int64 {
		ts, err := time.Parse("2006-01-02 15:04:05.999999", s)
		if err != nil {
			t.Fatal(err)
		}
		return ts.UnixMicro()
	}
	for _, tc := range []struct {
		name   string
		in     string
		modern bool
		want   string
		err    string
	}{
		{"micros kept on DateTime64", "2024-02-29 12:34:56.123456", true, "2024-02-29 12:34:56.123456", ""},
		{"1950 on DateTime64", "1950-01-01 00:00:00.5", true, "1950-01-01 00:00:00.5", ""},
		{"micros dropped on DateTime", "2024-02-29 12:34:56.999999", false, "2024-02-29 12:34:56", ""},
		{"1969 on DateTime", "1969-12-31 23:59:59.5", false, "", "outside the range of ClickHouse DateTime"},
		{"2107 on DateTime", "2107-01-01 00:00:00", false, "", "outside the range"},
		{"1899 on DateTime64", "1899-12-31 23:59:59", true, "", "outside the range of ClickHouse DateTime64(6)"},
		{"2263 on DateTime64", "2263-01-01 00:00:00", true, "", "outside the range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := timestampValue(us(tc.in), tc.modern)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got.Format("2006-01-02 15:04:05.999999") != tc.want {
				t.Fatalf("got %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestFormatTimeAndInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{formatTime(0), "00:00:00"},
		{formatTime(((13*60+5)*60+9)*1e6 + 120000), "13:05:09.12"},
		{formatTime(86399999999), "23:59:59.999999"},
		{formatInterval(arrow.MonthDayNanoInterval{}), "PT0S"},
		{formatInterval(arrow.MonthDayNanoInterval{Months: 14, Days: -3, Nanoseconds: (4*3600 + 5*60 + 6) * 1e9}), "P1Y2M-3DT4H5M6S"},
		{formatInterval(arrow.MonthDayNanoInterval{Nanoseconds: -1500000000}), "PT-1.5S"},
		{formatInterval(arrow.MonthDayNanoInterval{Days: 1}), "P1D"},
		{formatInterval(arrow.MonthDayNanoInterval{Months: -1}), "P-1M"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestConvertColumn(t *testing.T) {
	t.Parallel()
	mem := memory.NewGoAllocator()
	ib := array.NewInt64Builder(mem)
	ib.AppendValues([]int64{1, 2}, []bool{true, false})
	ints := ib.NewArray()
	defer ints.Release()

	t.Run("nullable with marker row", func(t *testing.T) {
		got, err := convertColumn(ints, false, true, 1)
		if err != nil {
			t.Fatal(err)
		}
		v := got.([]*int64)
		if len(v) != 3 || *v[0] != 1 || v[1] != nil || v[2] != nil {
			t.Fatalf("got %v", v)
		}
	})
	t.Run("NULL in a key column", func(t *testing.T) {
		_, err := convertColumn(ints, false, false, 0)
		var re *rangeError
		if !errors.As(err, &re) || re.row != 1 {
			t.Fatalf("got %v, want a range error at row 1", err)
		}
	})
	t.Run("list", func(t *testing.T) {
		lb := array.NewListBuilder(mem, arrow.BinaryTypes.String)
		sb := lb.ValueBuilder().(*array.StringBuilder)
		lb.Append(true)
		sb.Append("a")
		sb.AppendNull()
		lb.AppendNull()
		lb.Append(true)
		arr := lb.NewArray()
		defer arr.Release()
		got, err := convertColumn(arr, false, false, 1)
		if err != nil {
			t.Fatal(err)
		}
		v := got.([][]*string)
		if len(v) != 4 || len(v[0]) != 2 || *v[0][0] != "a" || v[0][1] != nil || len(v[1]) != 0 || len(v[2]) != 0 || len(v[3]) != 0 {
			t.Fatalf("got %v", v)
		}
	})
	t.Run("date out of range names the row", func(t *testing.T) {
		db := array.NewDate32Builder(mem)
		db.AppendValues([]arrow.Date32{day(2000, 1, 1), day(1960, 1, 1)}, nil)
		arr := db.NewArray()
		defer arr.Release()
		_, err := convertColumn(arr, false, true, 0)
		var re *rangeError
		if !errors.As(err, &re) || re.row != 1 || !strings.Contains(err.Error(), "1960-01-01") {
			t.Fatalf("got %v", err)
		}
	})
}
