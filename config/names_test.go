package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseQualified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{"public.orders", []string{"public", "orders"}, ""},
		{"Public.Orders", []string{"public", "orders"}, ""},
		{`shop."Order Items"`, []string{"shop", "Order Items"}, ""},
		{`"a.b".c`, []string{"a.b", "c"}, ""},
		{`s."say ""hi"""`, []string{"s", `say "hi"`}, ""},
		{"s.t$1", []string{"s", "t$1"}, ""},
		{"_s.été", []string{"_s", "été"}, ""},
		{"orders", []string{"orders"}, ""},
		{"a.b.c", []string{"a", "b", "c"}, ""},
		{"1s.t", nil, "unexpected '1'"},
		{"s.t-x", nil, "unexpected '-'"},
		{"s..t", nil, "empty name"},
		{`s.""`, nil, "empty name"},
		{"", nil, "empty name"},
		{`s."t`, nil, "unterminated"},
		{`s."t"x`, nil, "unexpected 'x'"},
		{"s. t", nil, "unexpected ' '"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseQualified(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseQualified(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parseQualified(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestDefaultSlotName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"demo":           "sluice_demo",
		"orders-to-lake": "sluice_orders_to_lake",
		"a_b-c":          "sluice_a_b_c",
	} {
		if got := DefaultSlotName(in); got != want || !slotRe.MatchString(got) {
			t.Errorf("DefaultSlotName(%q) = %q, want %q", in, got, want)
		}
	}
	// The longest allowed pipeline name still gives a slot name Postgres accepts.
	if n := len(DefaultSlotName(strings.Repeat("p", maxPipelineLen))); n != maxPGName {
		t.Errorf("longest default slot name has %d bytes, want %d", n, maxPGName)
	}
}
