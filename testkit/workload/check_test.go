package workload

import (
	"strings"
	"testing"
)

func TestCompareClassifiesDifferences(t *testing.T) {
	t.Parallel()
	tbl := &Table{Name: "t", Columns: []Column{
		{Name: "id", Kind: Int8, Key: true}, {Name: "name", Kind: Text}, {Name: "at", Kind: Timestamp},
	}}
	row := func(id, name, at string) Row { return Row{Key: Key{id}, Values: []string{id, name, at}} }
	const ts = "2024-02-29T13:45:00.123456Z"
	src := []Row{row("1", "a", ts), row("2", "b", ts), row("3", "c", ts)}
	seconds := func(c Column, v string) string {
		if c.Kind == Timestamp {
			return TruncateToSecond(v)
		}
		return v
	}
	cases := []struct {
		name   string
		sink   []Row
		expect func(Column, string) string
		want   map[DiffKind]int
		first  string // a substring of the first difference
	}{
		{"equal", src, nil, map[DiffKind]int{}, ""},
		{"missing", src[:2], nil, map[DiffKind]int{Missing: 1}, "key 3 missing"},
		{"extra", append(append([]Row(nil), src...), row("9", "z", ts)), nil, map[DiffKind]int{Extra: 1}, "key 9 extra"},
		{"stale names the column", []Row{src[0], row("2", "B", ts), src[2]}, nil, map[DiffKind]int{Stale: 1},
			`key 2 stale: name is "B" in the sink, "b" in the source`},
		{"duplicated", append(append([]Row(nil), src...), src[1]), nil, map[DiffKind]int{Duplicated: 1}, "key 2 visible more than once"},
		{"expect maps the source side", []Row{row("1", "a", "2024-02-29T13:45:00.000000Z"), row("2", "b", "2024-02-29T13:45:00.000000Z"),
			row("3", "c", "2024-02-29T13:45:00.000000Z")}, seconds, map[DiffKind]int{}, ""},
		{"without expect a truncated value is stale", []Row{row("1", "a", "2024-02-29T13:45:00.000000Z"), src[1], src[2]}, nil,
			map[DiffKind]int{Stale: 1}, "key 1 stale: at"},
		{"all kinds at once, missing first", []Row{row("2", "x", ts), row("2", "x", ts), row("7", "g", ts)}, nil,
			map[DiffKind]int{Missing: 2, Extra: 1, Stale: 1, Duplicated: 1}, "key 1 missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := Compare(tbl, src, c.sink, c.expect, 3)
			r.Seed = 42
			for _, k := range []DiffKind{Missing, Extra, Stale, Duplicated} {
				if r.Counts[k] != c.want[k] {
					t.Errorf("%s: %d, want %d (%s)", k, r.Counts[k], c.want[k], r)
				}
			}
			if c.first == "" {
				if !r.Equal() || !strings.HasSuffix(r.String(), ": equal") {
					t.Errorf("want equal, got %s", r)
				}
				return
			}
			if r.Equal() || !strings.Contains(r.First[0].String(), c.first) {
				t.Errorf("first difference %v, want one containing %q", r.First, c.first)
			}
			if len(r.First) > 3 {
				t.Errorf("%d differences reported, want at most 3", len(r.First))
			}
			if !strings.Contains(r.String(), "workload seed 42") {
				t.Errorf("report %q does not name the seed", r)
			}
		})
	}
}

func TestCanon(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind Kind
		in   []string // every form must canonicalize to the first's canonical form
		want string
	}{
		{Float4, []string{"0.25", "2.5e-01", "0.2500"}, "0.25"},
		{Float8, []string{"-12345.5", "-1.23455e+04"}, "-12345.5"},
		{Numeric, []string{"12.500", "12.5"}, "12.5"},
		{Numeric, []string{"-0.00", "0"}, "0"},
		{NumericText, []string{"NaN"}, "NaN"},
		{Numeric, []string{"1200"}, "1200"},
		{Bool, []string{"true", "t", "1"}, "true"},
		{Bool, []string{"false", "f", "0"}, "false"},
		{Time, []string{"13:45:00.5", "13:45:00.500000"}, "13:45:00.500000"},
		{Time, []string{"13:45:00"}, "13:45:00.000000"},
		{Timestamp, []string{"2024-02-29 13:45:00.123456", "2024-02-29T13:45:00.123456", "2024-02-29T13:45:00.123456Z"}, "2024-02-29T13:45:00.123456Z"},
		{Timestamptz, []string{"2024-02-29 15:45:00.1+02", "2024-02-29T13:45:00.1Z", "2024-02-29 13:45:00.100000+00:00"}, "2024-02-29T13:45:00.100000Z"},
		{UUID, []string{"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"}, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{Bytea, []string{`\x0102FF`, "0102ff"}, "0102ff"},
		{JSON, []string{`{"b": [1, null], "a": "x<y"}`, `{"a":"x<y","b":[1,null]}`}, `{"a":"x<y","b":[1,null]}`},
		{Int8, []string{"9007199254740993"}, "9007199254740993"},
		{Text, []string{Null}, Null},
	}
	for _, c := range cases {
		for _, in := range c.in {
			if got := Canon(c.kind, in); got != c.want {
				t.Errorf("Canon(%s, %q) = %q, want %q", c.kind, in, got, c.want)
			}
		}
	}
}

func TestDocumentKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key  Key
		want string
	}{
		{Key{"42"}, "42"},
		{Key{"7", "L:3"}, "7::L%3A3"},
		{Key{"7", "a%b"}, "7::a%25b"},
	}
	for _, c := range cases {
		if got := DocumentKey(c.key); got != c.want {
			t.Errorf("DocumentKey(%v) = %q, want %q", c.key, got, c.want)
		}
	}
}

func TestHstoreTextRoundTrips(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ doc, want string }{
		{`{}`, ``},
		{`{"b":"1","a":null}`, `"b"=>"1", "a"=>NULL`},
		{`{"q\"t":"x\\y","":""}`, `"q\"t"=>"x\\y", ""=>""`},
	} {
		got, err := HstoreText([]byte(c.doc))
		if err != nil || got != c.want {
			t.Errorf("HstoreText(%s) = %q, %v; want %q", c.doc, got, err, c.want)
		}
	}
	if _, err := HstoreText([]byte(`"a"=>"1"`)); err == nil {
		t.Error("HstoreText of a string: no error")
	}
}
