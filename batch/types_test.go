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
		{"lower bound decoration", Column{Name: "a", TypeOID: 1007}, []Value{txt("[2:3]={1,2}")}, []any{[]any{int32(1), int32(2)}}},
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

func TestArrowSchemaUnsupported(t *testing.T) {
	t.Parallel()
	_, err := ArrowSchema(Schema{Table: testTable, Columns: []Column{
		{Name: "id", TypeOID: oidInt8},
		{Name: "geom", TypeOID: 17000, TypeName: "geometry", Category: "U"},
		{Name: "t", TypeOID: 1266, TypeName: "time with time zone", Category: "D"},
		{Name: "xs", TypeOID: 17001, TypeName: "geometry[]", Category: "A", ElemOID: 17000, ElemCategory: "U"},
	}})
	if !errors.Is(err, ErrUnsupportedType) {
		t.Fatalf("got %v, want ErrUnsupportedType", err)
	}
	var te *TypeError
	if !errors.As(err, &te) || te.Column != "geom" || te.Table != testTable {
		t.Errorf("first TypeError = %+v", te)
	}
	for _, s := range []string{"shop.orders", `"geom"`, "geometry", `"t"`, "time with time zone", `"xs"`, "publication"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
}
