package batch

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

func TestConvertArrays(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		col  Column
		in   []Value
		want []any
	}{
		{"int4[] with NULLs, empty and NULL arrays", Column{Name: "a", TypeOID: 1007},
			[]Value{txt("{1,2,NULL}"), txt("{}"), null, txt("{NULL}"), txt(" { 3 , -4 } ")},
			[]any{[]any{int32(1), int32(2), nil}, []any{}, nil, []any{nil}, []any{int32(3), int32(-4)}}},
		{"text[] quoting and escapes", Column{Name: "a", TypeOID: 1009},
			[]Value{txt(`{"a b","c\"d","e\\f",NULL,"NULL",""," x ","{}",",",null,ü€😀,a\,b}`)},
			[]any{[]any{"a b", `c"d`, `e\f`, nil, "NULL", "", " x ", "{}", ",", nil, "ü€😀", "a,b"}}},
		{"text[] with tab and backslashes as Postgres prints", Column{Name: "a", TypeOID: 1009},
			[]Value{txt("{\"a,b\",\"a\\\\b\",\"tab\there\",\"q\\\"uote\",\"back\\\\\\\\slash\"}")},
			[]any{[]any{"a,b", `a\b`, "tab\there", `q"uote`, `back\\slash`}}},
		// Postgres never prints a decoration for lower bound 1, but it reads one.
		{"lower bound 1 decoration", Column{Name: "a", TypeOID: 1007}, []Value{txt("[1:2]={1,2}")}, []any{[]any{int32(1), int32(2)}}},
		{"bpchar[] keeps padding", Column{Name: "a", TypeOID: 1014}, []Value{txt(`{"ab  "}`)}, []any{[]any{"ab  "}}},
		{"bytea[]", Column{Name: "a", TypeOID: 1001}, []Value{txt(`{"\\x0102",NULL}`)}, []any{[]any{[]byte{1, 2}, nil}}},
		{"numeric(5,1)[]", Column{Name: "a", TypeOID: 1231, TypeMod: typmod(5, 1)}, []Value{txt("{1.5,-2,NULL}")},
			[]any{[]any{decNum("1.5", 5, 1), decNum("-2.0", 5, 1), nil}}},
		{"unconstrained numeric[] keeps NaN as text", Column{Name: "a", TypeOID: 1231, TypeMod: -1}, []Value{txt("{1.5,NaN}")},
			[]any{[]any{"1.5", "NaN"}}},
		{"timestamptz[]", Column{Name: "a", TypeOID: 1185}, []Value{txt(`{"2020-01-01 00:00:00+00","1960-06-01 12:00:00+02"}`)},
			[]any{[]any{micros(2020, 1, 1, 0, 0, 0, 0), micros(1960, 6, 1, 10, 0, 0, 0)}}},
		{"date[] with BC", Column{Name: "a", TypeOID: 1182}, []Value{txt(`{"0044-03-15 BC",2040-01-01}`)},
			[]any{[]any{day(-43, 3, 15), day(2040, 1, 1)}}},
		{"interval[]", Column{Name: "a", TypeOID: 1187}, []Value{txt(`{"1 day","-00:00:01"}`)},
			[]any{[]any{mdn(0, 1, 0), mdn(0, 0, -1e9)}}},
		{"uuid[]", Column{Name: "a", TypeOID: 2951}, []Value{txt(`{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}`)},
			[]any{[]any{[16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}}}},
		{"jsonb[]", Column{Name: "a", TypeOID: 3807}, []Value{txt(`{"{\"a\": \"b\"}"}`)}, []any{[]any{`{"a": "b"}`}}},
		{"bool[]", Column{Name: "a", TypeOID: 1000}, []Value{txt(`{t,f,NULL}`)}, []any{[]any{true, false, nil}}},
		{"enum[] by category", Column{Name: "a", TypeOID: 91235, Category: "A", ElemOID: 91234, ElemCategory: "E"},
			[]Value{txt(`{happy,sad}`)}, []any{[]any{"happy", "sad"}}},
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

func TestArrowSchema(t *testing.T) {
	t.Parallel()
	schema := Schema{Table: testTable, Columns: []Column{
		{Name: "id", TypeOID: oidInt8, TypeName: "bigint", Key: true, NotNull: true},
		{Name: "price", TypeOID: oidNumeric, TypeName: "numeric(12,2)", TypeMod: typmod(12, 2)},
		{Name: "tags", TypeOID: 1009, TypeName: "text[]"},
		{Name: "u", TypeOID: oidUUID, TypeName: "uuid"},
		{Name: "at", TypeOID: oidTimestamptz, TypeName: "timestamp with time zone"},
	}}
	as, err := ArrowSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := []string{"int64", "decimal(12, 2)", "list<element: utf8, nullable>", "extension<arrow.uuid>", "timestamp[us, tz=UTC]",
		"utf8", "utf8", "timestamp[us, tz=UTC]", "timestamp[us, tz=UTC]", "utf8", "utf8"}
	wantNames := []string{"id", "price", "tags", "u", "at", ColOp, ColPos, ColCommitTS, ColIngestTS, ColSnapshot, ColPhase}
	if as.NumFields() != len(wantNames) {
		t.Fatalf("got %d fields, want %d: %v", as.NumFields(), len(wantNames), as)
	}
	for i, f := range as.Fields() {
		if f.Name != wantNames[i] || f.Type.String() != wantTypes[i] {
			t.Errorf("field %d: got %s %s, want %s %s", i, f.Name, f.Type, wantNames[i], wantTypes[i])
		}
	}
	id := as.Field(0)
	if id.Nullable {
		t.Error("key field id is nullable")
	}
	if v, _ := id.Metadata.GetValue(MetaKey); v != "true" {
		t.Errorf("id %s = %q, want true", MetaKey, v)
	}
	if v, _ := as.Field(1).Metadata.GetValue(MetaPGType); v != "numeric(12,2)" {
		t.Errorf("price %s = %q", MetaPGType, v)
	}
	if v, _ := as.Field(1).Metadata.GetValue(MetaKey); v != "false" || !as.Field(1).Nullable {
		t.Errorf("price: key %q nullable %v, want false and nullable", v, as.Field(1).Nullable)
	}
	if _, ok := as.Field(3).Type.(*extensions.UUIDType); !ok {
		t.Errorf("uuid field is %T", as.Field(3).Type)
	}
}

func TestArrowSchemaNumericMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		typmod  int32
		want    arrow.DataType
		comment string
	}{
		{"unconstrained", -1, arrow.BinaryTypes.String, ""},
		{"numeric(12,2)", typmod(12, 2), &arrow.Decimal128Type{Precision: 12, Scale: 2}, ""},
		{"numeric(38,38)", typmod(38, 38), &arrow.Decimal128Type{Precision: 38, Scale: 38}, ""},
		{"numeric(38,0)", typmod(38, 0), &arrow.Decimal128Type{Precision: 38, Scale: 0}, ""},
		{"numeric(39,0)", typmod(39, 0), arrow.BinaryTypes.String, ""},
		{"numeric(1000,2)", typmod(1000, 2), arrow.BinaryTypes.String, ""},
		{"numeric(5,-2)", typmod(5, -2), &arrow.Decimal128Type{Precision: 7, Scale: 0}, ""},
		{"numeric(37,-2)", typmod(37, -2), arrow.BinaryTypes.String, ""},
		{"numeric(2,5)", typmod(2, 5), &arrow.Decimal128Type{Precision: 5, Scale: 5}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			as, err := ArrowSchema(Schema{Table: testTable, Columns: []Column{{Name: "n", TypeOID: oidNumeric, TypeMod: tc.typmod}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := as.Field(0).Type; !arrow.TypeEqual(got, tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestArrowSchemaContextNameClash(t *testing.T) {
	t.Parallel()
	_, err := ArrowSchema(Schema{Table: testTable, Columns: []Column{{Name: "id", TypeOID: oidInt8, Key: true}, {Name: ColOp, TypeOID: oidText}}})
	if err == nil || !strings.Contains(err.Error(), `"__op"`) || !strings.Contains(err.Error(), "shop.orders") {
		t.Errorf("got %v, want an error naming the table and the column __op", err)
	}
}

// TestArrowSchemaEveryTypeMaps maps the types without a native Arrow type, as the source
// describes them (OIDs of extension types vary by database): each maps, to the type docs/types.md
// names, and its values go through as the exact text Postgres prints.
func TestArrowSchemaEveryTypeMaps(t *testing.T) {
	t.Parallel()
	const ext = 90000 // an extension type's OID: any non-built-in OID
	cases := []struct {
		name string
		col  Column
		want string
		in   string
		out  any
	}{
		{"citext", Column{TypeOID: ext, TypeName: "citext", Category: "S"}, "utf8", "MiXeD Case", "MiXeD Case"},
		{"hstore", Column{TypeOID: ext, TypeName: "hstore", Category: "U"}, "utf8", `"a"=>"1", "b"=>NULL`, `"a"=>"1", "b"=>NULL`},
		{"ltree", Column{TypeOID: ext, TypeName: "ltree", Category: "U"}, "utf8", "top.science.astronomy", "top.science.astronomy"},
		{"geometry", Column{TypeOID: ext, TypeName: "geometry", Category: "U"}, "utf8",
			"0101000020E6100000000000000000F03F0000000000000040", "0101000020E6100000000000000000F03F0000000000000040"},
		{"money", Column{TypeOID: 790, TypeName: "money", Category: "N"}, "utf8", "-$1,234.56", "-$1,234.56"},
		{"macaddr", Column{TypeOID: 829, TypeName: "macaddr", Category: "U"}, "utf8", "08:00:2b:01:02:03", "08:00:2b:01:02:03"},
		{"macaddr8", Column{TypeOID: 774, TypeName: "macaddr8", Category: "U"}, "utf8", "08:00:2b:01:02:03:04:05", "08:00:2b:01:02:03:04:05"},
		{"bit", Column{TypeOID: 1560, TypeName: "bit(4)", TypeMod: 4, Category: "V"}, "utf8", "1010", "1010"},
		{"varbit", Column{TypeOID: 1562, TypeName: "bit varying", Category: "V"}, "utf8", "101", "101"},
		{"timetz keeps its offset", Column{TypeOID: 1266, TypeName: "time with time zone", Category: "D"}, "utf8", "12:34:56.789+05:30", "12:34:56.789+05:30"},
		{"xml", Column{TypeOID: 142, TypeName: "xml", Category: "U"}, "utf8", "<a>x</a>", "<a>x</a>"},
		{"tsvector", Column{TypeOID: 3614, TypeName: "tsvector", Category: "U"}, "utf8", "'a':1 'b':2", "'a':1 'b':2"},
		{"tsquery", Column{TypeOID: 3615, TypeName: "tsquery", Category: "U"}, "utf8", "'a' & 'b'", "'a' & 'b'"},
		{"range", Column{TypeOID: 3904, TypeName: "int4range", Category: "R"}, "utf8", "[1,5)", "[1,5)"},
		{"composite", Column{TypeOID: ext, TypeName: "pair", Category: "C"}, "utf8", `(1,"a b",)`, `(1,"a b",)`},
		{"enum", Column{TypeOID: ext, TypeName: "mood", Category: "E"}, "utf8", "happy", "happy"},
		{"inet", Column{TypeOID: oidInet, TypeName: "inet", Category: "I"}, "utf8", "192.168.0.1/24", "192.168.0.1/24"},
		{"point (geometric)", Column{TypeOID: 600, TypeName: "point", Category: "G", ElemOID: oidFloat8}, "utf8", "(1,2)", "(1,2)"},
		{"int2vector is text, not a list", Column{TypeOID: oidInt2Vector, TypeName: "int2vector", Category: "A", ElemOID: oidInt2}, "utf8", "1 2", "1 2"},
		{"oid", Column{TypeOID: oidOID, TypeName: "oid", Category: "N"}, "int64", "4294967295", int64(4294967295)},
		{"multi-dimensional int[][] is text", Column{TypeOID: 1007, TypeName: "integer[]", Category: "A", ElemOID: oidInt4, Dims: 2}, "utf8",
			"{{1,2},{3,4}}", "{{1,2},{3,4}}"},
		{"citext[]", Column{TypeOID: ext + 1, TypeName: "citext[]", Category: "A", ElemOID: ext, ElemCategory: "S", Dims: 1},
			"list<element: utf8, nullable>", `{Ab,"c d",NULL}`, []any{"Ab", "c d", nil}},
		{"timetz[]", Column{TypeOID: 1270, TypeName: "time with time zone[]", Category: "A", ElemOID: 1266, ElemCategory: "D"},
			"list<element: utf8, nullable>", `{12:00:00+05}`, []any{"12:00:00+05"}},
		{"oid[]", Column{TypeOID: 1028, TypeName: "oid[]", Category: "A", ElemOID: oidOID}, "list<element: int64, nullable>", "{1,NULL}", []any{int64(1), nil}},
		{"domain over int[] (base type resolved)", Column{TypeOID: 1007, TypeName: "intlist", Category: "A", ElemOID: oidInt4},
			"list<element: int32, nullable>", "{1,2}", []any{int32(1), int32(2)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.col.Name = "c"
			as, err := ArrowSchema(Schema{Table: testTable, Columns: []Column{tc.col}})
			if err != nil {
				t.Fatalf("no column may be refused for its type: %v", err)
			}
			if got := as.Field(0).Type.String(); got != tc.want {
				t.Errorf("arrow type %s, want %s", got, tc.want)
			}
			got, err := buildColumn(t, tc.col, txt(tc.in), null)
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			if !sameValues(got, []any{tc.out, nil}) {
				t.Errorf("got %v, want %v and NULL", got, tc.out)
			}
		})
	}
}

func TestParseOIDRejects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "-1", "4294967296", "12a", "99999999999"} {
		_, err := buildColumn(t, Column{Name: "o", TypeOID: oidOID, TypeName: "oid"}, txt(in))
		if !errors.Is(err, ErrMalformedValue) || !strings.Contains(err.Error(), `"o"`) {
			t.Errorf("oid %q: got %v, want ErrMalformedValue naming the column", in, err)
		}
	}
}
