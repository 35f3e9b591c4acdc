package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseByteSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want ByteSize
		err  string
	}{
		{"64MiB", 64 << 20, ""},
		{"64MB", 64_000_000, ""},
		{"64mib", 64 << 20, ""},
		{"64 MiB", 64 << 20, ""},
		{"1048576", 1 << 20, ""},
		{"512KiB", 512 << 10, ""},
		{"1.5GiB", 3 << 29, ""},
		{"2kb", 2000, ""},
		{"1TiB", 1 << 40, ""},
		{"10B", 10, ""},
		{"64M", 0, "cannot read"},
		{"MiB", 0, "cannot read"},
		{"", 0, "cannot read"},
		{"-1MiB", 0, "cannot read"},
		{"1.2.3MB", 0, "cannot read"},
		{"0.5B", 0, "not a whole number of bytes"},
		{"99999999999999999999", 0, "out of range"},
		{"9000000TiB", 0, "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseByteSize(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseByteSize(%q) = %d, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseByteSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestByteSizeFormats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		size ByteSize
		str  string
	}{
		{64 * MiB, "64MiB"},
		{1536, "1536B"},
		{3 * KiB, "3KiB"},
		{2 * GiB, "2GiB"},
		{1000, "1000B"},
		{0, "0B"},
	}
	for _, tc := range tests {
		t.Run(tc.str, func(t *testing.T) {
			t.Parallel()
			if got := tc.size.String(); got != tc.str {
				t.Errorf("String() = %q, want %q", got, tc.str)
			}
			back, err := ParseByteSize(tc.size.String())
			if err != nil || back != tc.size {
				t.Errorf("ParseByteSize(String()) = %d, %v", back, err)
			}
			js, _ := json.Marshal(tc.size)
			var fromJSON ByteSize
			if err := json.Unmarshal(js, &fromJSON); err != nil || fromJSON != tc.size {
				t.Errorf("JSON %s decodes to %d, %v", js, fromJSON, err)
			}
		})
	}
	var b ByteSize
	if err := json.Unmarshal([]byte(`"8MiB"`), &b); err != nil || b != 8*MiB {
		t.Errorf(`"8MiB" decodes to %d, %v`, b, err)
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Duration
		err  string
	}{
		{`"1s"`, Duration(time.Second), ""},
		{`"1m30s"`, Duration(90 * time.Second), ""},
		{`"250ms"`, Duration(250 * time.Millisecond), ""},
		{`1000000000`, 0, "want a duration"},
		{`"1 second"`, 0, "cannot read"},
		{`null`, 0, "want a duration"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			var d Duration
			err := json.Unmarshal([]byte(tc.in), &d)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("decoding %s: %v; want an error containing %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || d != tc.want {
				t.Fatalf("decoding %s = %v, %v; want %v", tc.in, d, err, tc.want)
			}
			js, _ := json.Marshal(d)
			var back Duration
			if err := json.Unmarshal(js, &back); err != nil || back != d {
				t.Errorf("round trip via %s = %v, %v", js, back, err)
			}
		})
	}
}
