package couchbase

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// record builds a one-row record of schema from text values (nil is NULL) with batch's builder,
// as the reader stages it.
func record(t *testing.T, schema batch.Schema, op batch.Op, values ...*string) sinks.Batch {
	t.Helper()
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, schema)
	if err != nil {
		t.Fatalf("NewRecordBuilder: %v", err)
	}
	defer rb.Release()
	vals := make([]batch.Value, len(values))
	for i, v := range values {
		if v == nil {
			vals[i] = batch.Value{Null: true}
		} else {
			vals[i] = batch.Value{Text: []byte(*v)}
		}
	}
	ch := batch.Change{Op: op, Pos: batch.Position{LSN: 0x16B3748, Seq: 3}, Values: vals,
		CommitTS: time.Date(2026, 11, 30, 12, 0, 0, 250000000, time.UTC)}
	rec, err := rb.Build([]batch.Change{ch}, time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Cleanup(rec.Release)
	return sinks.Batch{Spec: sinks.TableSpec{Target: "c", Schema: schema}, Record: rec}
}

func s(v string) *string { return &v }

func col(name string, oid uint32, typeName string, typmod int32) batch.Column {
	return batch.Column{Name: name, TypeOID: oid, TypeName: typeName, TypeMod: typmod}
}

// TestBodyEncoding pins the JSON of every type the Arrow mapping produces, from the text Postgres
// prints.
func TestBodyEncoding(t *testing.T) {
	t.Parallel()
	numeric122 := int32(12<<16|2) + 4
	cases := []struct {
		name string
		col  batch.Column
		text *string
		want string
	}{
		{"null", col("v", 25, "text", -1), nil, `null`},
		{"smallint", col("v", 21, "smallint", -1), s("-12"), `-12`},
		{"integer", col("v", 23, "integer", -1), s("2147483647"), `2147483647`},
		{"bigint exact", col("v", 20, "bigint", -1), s("9223372036854775807"), `9223372036854775807`},
		{"real", col("v", 700, "real", -1), s("1.1"), `1.1`},
		{"double", col("v", 701, "double precision", -1), s("0.1"), `0.1`},
		{"double large", col("v", 701, "double precision", -1), s("1e+300"), `1e+300`},
		{"double tiny", col("v", 701, "double precision", -1), s("1.5e-07"), `1.5e-07`},
		{"double NaN", col("v", 701, "double precision", -1), s("NaN"), `"NaN"`},
		{"double -Infinity", col("v", 701, "double precision", -1), s("-Infinity"), `"-Infinity"`},
		{"numeric(12,2) keeps scale", col("v", 1700, "numeric(12,2)", numeric122), s("12.50"), `"12.50"`},
		{"numeric(12,2) negative", col("v", 1700, "numeric(12,2)", numeric122), s("-0.05"), `"-0.05"`},
		{"numeric unconstrained", col("v", 1700, "numeric", -1), s("123456789012345678901234567890123456789012.000000001"), `"123456789012345678901234567890123456789012.000000001"`},
		{"numeric NaN", col("v", 1700, "numeric", -1), s("NaN"), `"NaN"`},
		{"boolean", col("v", 16, "boolean", -1), s("t"), `true`},
		{"text escapes", col("v", 25, "text", -1), s("a\"b\\c\nd\u0001€"), `"a\"b\\c\nd\u0001€"`},
		{"bpchar keeps padding", col("v", 1042, "character(4)", 8), s("ab  "), `"ab  "`},
		{"json embedded", col("v", 114, "json", -1), s(`{"a": [1, 2.50], "b": null}`), `{"a": [1, 2.50], "b": null}`},
		{"jsonb embedded", col("v", 3802, "jsonb", -1), s(`{"a": 1}`), `{"a": 1}`},
		{"inet", col("v", 869, "inet", -1), s("10.0.0.1/8"), `"10.0.0.1/8"`},
		{"bytea base64", col("v", 17, "bytea", -1), s(`\x00ff10`), `"AP8Q"`},
		{"date", col("v", 1082, "date", -1), s("2026-11-30"), `"2026-11-30"`},
		{"date BC", col("v", 1082, "date", -1), s("0044-03-15 BC"), `"-0043-03-15"`},
		{"date 1 BC", col("v", 1082, "date", -1), s("0001-01-01 BC"), `"0000-01-01"`},
		{"date past 9999", col("v", 1082, "date", -1), s("10000-01-01"), `"+10000-01-01"`},
		{"time", col("v", 1083, "time", -1), s("12:30:00.5"), `"12:30:00.5"`},
		{"time whole", col("v", 1083, "time", -1), s("23:59:59"), `"23:59:59"`},
		{"timestamp", col("v", 1114, "timestamp", -1), s("2026-11-30 12:30:00.000001"), `"2026-11-30T12:30:00.000001"`},
		{"timestamp 1967", col("v", 1114, "timestamp", -1), s("1967-01-02 03:04:05"), `"1967-01-02T03:04:05"`},
		{"timestamptz to UTC", col("v", 1184, "timestamptz", -1), s("2026-11-30 12:30:00.5+01"), `"2026-11-30T11:30:00.5Z"`},
		{"interval", col("v", 1186, "interval", -1), s("1 year 2 mons 3 days 04:05:06.5"), `"P1Y2M3DT4H5M6.5S"`},
		{"interval negative parts", col("v", 1186, "interval", -1), s("-1 years -2 mons +3 days -04:05:06"), `"P-1Y-2M3DT-4H-5M-6S"`},
		{"interval sub-second negative", col("v", 1186, "interval", -1), s("-00:00:00.5"), `"PT-0.5S"`},
		{"interval zero", col("v", 1186, "interval", -1), s("00:00:00"), `"PT0S"`},
		{"interval days only", col("v", 1186, "interval", -1), s("3 days"), `"P3D"`},
		{"uuid", col("v", 2950, "uuid", -1), s("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"), `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`},
		{"int array with null", col("v", 1007, "integer[]", -1), s("{1,NULL,3}"), `[1,null,3]`},
		{"text array", col("v", 1009, "text[]", -1), s(`{a,"b c","d\"e"}`), `["a","b c","d\"e"]`},
		{"jsonb array embedded", col("v", 3807, "jsonb[]", -1), s(`{"{\"a\": 1}",null}`), `[{"a": 1},null]`},
		{"numeric array exact", col("v", 1231, "numeric(12,2)[]", numeric122), s(`{1.10,NULL}`), `["1.10",null]`},
		{"hstore object", col("v", 16385, "hstore", -1), s(`"a"=>"1", "b"=>NULL, "q\"t"=>"x\\y"`), `{"a":"1","b":null,"q\"t":"x\\y"}`},
		{"hstore empty", col("v", 16385, "hstore", -1), s(``), `{}`},
		{"hstore null", col("v", 16385, "public.hstore", -1), nil, `null`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			schema := batch.Schema{Table: batch.TableName{Schema: "s", Name: "t"}, Columns: []batch.Column{
				{Name: "id", TypeOID: 20, TypeName: "bigint", Key: true, NotNull: true}, tc.col}}
			b := record(t, schema, batch.OpInsert, s("1"), tc.text)
			l, err := newLayout(b.Spec)
			if err != nil {
				t.Fatal(err)
			}
			ops, err := l.plan(b.Record)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"id":1,"v":` + tc.want + `}`
			if got := string(ops[0].body); got != want {
				t.Errorf("body\n got %s\nwant %s", got, want)
			}
			if !json.Valid(ops[0].body) {
				t.Errorf("body is not valid JSON: %s", ops[0].body)
			}
		})
	}
}

// TestMetadataMembers: named context columns appear under their names, in the order given; the
// others never appear.
func TestMetadataMembers(t *testing.T) {
	t.Parallel()
	schema := batch.Schema{Table: batch.TableName{Schema: "s", Name: "t"}, Columns: []batch.Column{
		{Name: "id", TypeOID: 20, TypeName: "bigint", Key: true, NotNull: true}}}
	b := record(t, schema, batch.OpUpdate, s("7"))
	b.Spec.Metadata = []sinks.MetadataColumn{
		{From: "commit_ts", As: "committed_at"}, {From: "op", As: "op"}, {From: "pos", As: "pos"},
		{From: "snapshot", As: "snap"}, {From: "phase", As: "phase"}, {From: "ingest_ts", As: "ingested_at"},
	}
	l, err := newLayout(b.Spec)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := l.plan(b.Record)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":7,"committed_at":"2026-11-30T12:00:00.25Z","op":"update","pos":"0/16B3748:3","snap":null,` +
		`"phase":"stream","ingested_at":"2026-11-30T12:00:01Z"}`
	if got := string(ops[0].body); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	b.Spec.Metadata = nil
	l, _ = newLayout(b.Spec)
	ops, _ = l.plan(b.Record)
	if got := string(ops[0].body); got != `{"id":7}` {
		t.Errorf("without metadata entries the body is %s, want only the columns", got)
	}
}

// TestKeys pins the document key encoding, and rejects keys Couchbase cannot store as poison.
func TestKeys(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 251)
	cases := []struct {
		name    string
		cols    []batch.Column
		values  []*string
		want    string
		wantErr string
	}{
		{"bigint", []batch.Column{{Name: "id", TypeOID: 20, Key: true}}, []*string{s("42")}, "42", ""},
		{"text as is", []batch.Column{{Name: "id", TypeOID: 25, Key: true}}, []*string{s("a:b%c")}, "a:b%c", ""},
		{"uuid canonical", []batch.Column{{Name: "id", TypeOID: 2950, Key: true}}, []*string{s("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11")}, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", ""},
		{"numeric exact", []batch.Column{{Name: "id", TypeOID: 1700, TypeMod: (10<<16 | 2) + 4, Key: true}}, []*string{s("1.50")}, "1.50", ""},
		{"timestamptz", []batch.Column{{Name: "id", TypeOID: 1184, Key: true}}, []*string{s("2026-01-02 03:04:05+00")}, "2026-01-02T03:04:05Z", ""},
		{"composite", []batch.Column{{Name: "a", TypeOID: 20, Key: true}, {Name: "b", TypeOID: 25, Key: true}}, []*string{s("1"), s("x")}, "1::x", ""},
		{"composite escapes", []batch.Column{{Name: "a", TypeOID: 25, Key: true}, {Name: "b", TypeOID: 25, Key: true}}, []*string{s("a::b"), s("%3A")}, "a%3A%3Ab::%253A", ""},
		{"composite skips non-key", []batch.Column{{Name: "a", TypeOID: 20, Key: true}, {Name: "n", TypeOID: 25}, {Name: "b", TypeOID: 20, Key: true}}, []*string{s("1"), s("zz"), s("2")}, "1::2", ""},
		{"too long", []batch.Column{{Name: "id", TypeOID: 25, Key: true}}, []*string{s(long)}, "", "at most 250"},
		{"empty", []batch.Column{{Name: "id", TypeOID: 25, Key: true}}, []*string{s("")}, "", "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for i := range tc.cols {
				tc.cols[i].NotNull = tc.cols[i].Key
			}
			schema := batch.Schema{Table: batch.TableName{Schema: "s", Name: "t"}, Columns: tc.cols}
			b := record(t, schema, batch.OpInsert, tc.values...)
			l, err := newLayout(b.Spec)
			if err != nil {
				t.Fatal(err)
			}
			ops, err := l.plan(b.Record)
			if tc.wantErr != "" {
				if !sinks.IsPoison(err) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "s.t") {
					t.Fatalf("plan: %v; want poison naming the table and saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ops[0].key != tc.want {
				t.Errorf("key %q, want %q", ops[0].key, tc.want)
			}
		})
	}
}

// TestLayoutPoison: specs the sink cannot map to documents are poison.
func TestLayoutPoison(t *testing.T) {
	t.Parallel()
	base := func() sinks.TableSpec {
		return sinks.TableSpec{Target: "c", Schema: batch.Schema{Table: batch.TableName{Schema: "s", Name: "t"},
			Columns: []batch.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "name", TypeOID: 25}}}}
	}
	noKey, clash, unknown := base(), base(), base()
	noKey.Schema.Columns[0].Key = false
	clash.Metadata = []sinks.MetadataColumn{{From: "op", As: "name"}}
	unknown.Metadata = []sinks.MetadataColumn{{From: "lsn", As: "x"}}
	for name, spec := range map[string]sinks.TableSpec{"no key": noKey, "member clash": clash, "unknown context column": unknown} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := newLayout(spec); !sinks.IsPoison(err) {
				t.Fatalf("newLayout: %v, want poison", err)
			} else {
				t.Logf("error: %v", err)
			}
		})
	}
}
