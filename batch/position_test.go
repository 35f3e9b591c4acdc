package batch

import (
	"errors"
	"testing"
)

func TestPositionOrdering(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		a, b Position
		less bool
	}{
		{"lower LSN", Position{LSN: 1, Seq: 9}, Position{LSN: 2, Seq: 0}, true},
		{"higher LSN", Position{LSN: 3, Seq: 0}, Position{LSN: 2, Seq: 9}, false},
		{"same LSN lower seq", Position{LSN: 2, Seq: 1}, Position{LSN: 2, Seq: 2}, true},
		{"equal", Position{LSN: 2, Seq: 2}, Position{LSN: 2, Seq: 2}, false},
		{"LSN across the 32-bit boundary", Position{LSN: 0xFFFFFFFF, Seq: 5}, Position{LSN: 1 << 32}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.a.Less(tc.b); got != tc.less {
				t.Errorf("%s < %s = %v, want %v", tc.a, tc.b, got, tc.less)
			}
		})
	}
}

func TestPositionStringRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pos  Position
		want string
	}{
		{Position{}, "0/0:0"},
		{Position{LSN: 0x16B3748, Seq: 12}, "0/16B3748:12"},
		{Position{LSN: 0xABCDEF01_23456789, Seq: 4294967295}, "ABCDEF01/23456789:4294967295"},
		{Position{LSN: 1 << 32}, "1/0:0"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			if got := tc.pos.String(); got != tc.want {
				t.Errorf("String = %q, want %q", got, tc.want)
			}
			back, err := ParsePosition(tc.want)
			if err != nil || back != tc.pos {
				t.Errorf("ParsePosition(%q) = %v, %v; want %v", tc.want, back, err, tc.pos)
			}
			b, _ := tc.pos.AppendText([]byte("x="))
			if string(b) != "x="+tc.want {
				t.Errorf("AppendText = %q", b)
			}
		})
	}
}

func TestParsePositionErrors(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "0/16B3748", "16B3748:1", "0/XYZ:1", "0/1:-1", "0/1:x", "100000000/0:0", "0/1:4294967296"} {
		t.Run(s, func(t *testing.T) {
			t.Parallel()
			if p, err := ParsePosition(s); err == nil {
				t.Errorf("ParsePosition(%q) = %v, want an error", s, p)
			}
		})
	}
}

func TestSourcePositionCompare(t *testing.T) {
	t.Parallel()
	src := SourceID{SystemID: "7311234567890123456", Timeline: 1, Slot: "sluice_shop"}
	at := func(s SourceID, lsn uint64, seq uint32) SourcePosition {
		return SourcePosition{Source: s, Position: Position{LSN: lsn, Seq: seq}}
	}
	cases := []struct {
		name string
		a, b SourcePosition
		want int
		err  bool
	}{
		{"before", at(src, 1, 0), at(src, 1, 1), -1, false},
		{"after", at(src, 2, 0), at(src, 1, 9), 1, false},
		{"equal", at(src, 2, 3), at(src, 2, 3), 0, false},
		{"other system", at(src, 1, 0), at(SourceID{SystemID: "1", Timeline: 1, Slot: "sluice_shop"}, 2, 0), 0, true},
		{"other timeline", at(src, 1, 0), at(SourceID{SystemID: src.SystemID, Timeline: 2, Slot: src.Slot}, 2, 0), 0, true},
		{"other slot", at(src, 1, 0), at(SourceID{SystemID: src.SystemID, Timeline: 1, Slot: "other"}, 2, 0), 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.a.Compare(tc.b)
			if tc.err {
				if !errors.Is(err, ErrDifferentSource) {
					t.Errorf("Compare = %d, %v; want ErrDifferentSource", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Compare = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestSourcePositionRoundTrip(t *testing.T) {
	t.Parallel()
	sp := SourcePosition{Source: SourceID{SystemID: "7311234567890123456", Timeline: 3, Slot: "sluice_shop"}, Position: Position{LSN: 0x16B3748, Seq: 7}}
	s := sp.String()
	if s != "7311234567890123456/3/sluice_shop@0/16B3748:7" {
		t.Errorf("String = %q", s)
	}
	back, err := ParseSourcePosition(s)
	if err != nil || back != sp {
		t.Errorf("ParseSourcePosition(%q) = %v, %v", s, back, err)
	}
	for _, bad := range []string{"", "0/16B3748:7", "a/b@0/1:1", "1/2@0/1:1", "1/x/s@0/1:1", "1/1/s@zz"} {
		if _, err := ParseSourcePosition(bad); err == nil {
			t.Errorf("ParseSourcePosition(%q) succeeded", bad)
		}
	}
}
