package batch

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseQualifiedName(t *testing.T) {
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
		{"s." + strings.Repeat("t", MaxNameLen), []string{"s", strings.Repeat("t", MaxNameLen)}, ""},
		{"s." + strings.Repeat("t", MaxNameLen+1), nil, "longer than"},
		{"1s.t", nil, "unexpected '1'"},
		{"s.t-x", nil, "unexpected '-'"},
		{"s..t", nil, "empty name"},
		{"s.", nil, "empty name"},
		{`s.""`, nil, "empty name"},
		{"", nil, "empty name"},
		{`s."t`, nil, "unterminated"},
		{`s."t"x`, nil, "unexpected 'x'"},
		{"s. t", nil, "unexpected ' '"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseQualifiedName(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseQualifiedName(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseQualifiedName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestParseTableName holds the cases of the config's table-name parser and of the source's
// former one (schema.name as Postgres stores it). A name without a schema is refused: the
// config refused it at load, so no running pipeline has one.
func TestParseTableName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want TableName
		err  string
	}{
		{"public.orders", TableName{"public", "orders"}, ""},
		{"shop.orders", TableName{"shop", "orders"}, ""},
		{"Shop.Orders", TableName{"shop", "orders"}, ""},
		{`shop."Order Items"`, TableName{"shop", "Order Items"}, ""},
		{`"a.b".c`, TableName{"a.b", "c"}, ""},
		{"public.t_1", TableName{"public", "t_1"}, ""},
		{"orders", TableName{}, "not schema-qualified"},
		{"a.b.c", TableName{}, "3 parts"},
		{".orders", TableName{}, "empty name"},
		{"public.", TableName{}, "empty name"},
		{"", TableName{}, "empty name"},
		{"public.or ders", TableName{}, "unexpected ' '"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseTableName(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseTableName(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseTableName(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseIdent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want, err string
	}{
		{"id", "id", ""},
		{"ID", "id", ""},
		{`"Order Id"`, "Order Id", ""},
		{"s.id", "", "qualified"},
		{"", "", "empty name"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseIdent(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseIdent(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseIdent(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestNameRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		s         string
		plain     bool
		validSlot bool
	}{
		{"lower", "orders", true, true},
		{"underscore first", "_x", true, true},
		{"digit first", "1x", false, true},
		{"upper", "Orders", true, false},
		{"dash", "a-b", false, false},
		{"dot", "a.b", false, false},
		{"empty", "", false, false},
		{"longest slot", strings.Repeat("s", MaxNameLen), true, true},
		{"too long for a slot", strings.Repeat("s", MaxNameLen+1), true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := PlainName(tc.s); got != tc.plain {
				t.Errorf("PlainName(%q) = %v, want %v", tc.s, got, tc.plain)
			}
			if got := ValidSlotName(tc.s); got != tc.validSlot {
				t.Errorf("ValidSlotName(%q) = %v, want %v", tc.s, got, tc.validSlot)
			}
		})
	}
}
