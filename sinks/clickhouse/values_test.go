package clickhouse

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicecdc/sluice/batch"
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

func TestAppendTimeAndInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{string(batch.AppendTime(nil, 0)), "00:00:00"},
		{string(batch.AppendTime(nil, ((13*60+5)*60+9)*1e6+120000)), "13:05:09.12"},
		{string(batch.AppendTime(nil, 86399999999)), "23:59:59.999999"},
		{string(batch.AppendTime(nil, 86400*1e6)), "24:00:00"},
		{string(batch.AppendTime(nil, 5)), "00:00:00.000005"},
		{string(batch.AppendInterval(nil, arrow.MonthDayNanoInterval{})), "PT0S"},
		{string(batch.AppendInterval(nil, arrow.MonthDayNanoInterval{Months: 14, Days: -3, Nanoseconds: (4*3600 + 5*60 + 6) * 1e9})), "P1Y2M-3DT4H5M6S"},
		{string(batch.AppendInterval(nil, arrow.MonthDayNanoInterval{Nanoseconds: -1500000000})), "PT-1.5S"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	// batch.AppendTime prints what the sink printed with fmt before, on every fraction length.
	for us := int64(0); us <= 86400*1e6; us += 86400_000_000 / 9973 {
		for _, v := range []int64{us, us - us%10, us - us%1000, us - us%1e6} {
			if got, want := string(batch.AppendTime(nil, v)), oldFormatTime(v); got != want {
				t.Fatalf("batch.AppendTime(%d) = %q, the sink printed %q", v, got, want)
			}
		}
	}
}
