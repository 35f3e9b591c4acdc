package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
)

const typesDDL = `
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TABLE types (
  id int PRIMARY KEY,
  i2 int2, i4 int4, i8 int8, f4 float4, f8 float8,
  n12 numeric(12,2), n numeric, n50 numeric(50,10),
  b bool, t text, vc varchar(10), bp char(5), nm name,
  j json, jb jsonb, ip inet, cn cidr, en mood, by bytea,
  d date, tm time, ts timestamp, tstz timestamptz, iv interval, u uuid, dom posint,
  ia int[], ta text[], ea mood[], tsa timestamptz[], da posint[]
)`

// typeRows are the test rows: all NULL, the lower limits, the upper limits, special values.
// $1 is a large bytea.
var typeRows = []string{
	`INSERT INTO types (id) VALUES (1)`,
	`INSERT INTO types VALUES (2, -32768, -2147483648, -9223372036854775808, '-3.4028235e38', '-1.7976931348623157e308',
	  -9999999999.99, '-0.000000000000000000000000000000000000000000001', -1234567890123456789012345678901234567890.0123456789,
	  false, 'héllo wörld — 日本語 🎉', 'ab', 'x', 'n', '{"a": [1, 2]}', '{"b": {"c": null}}', '192.168.0.1/24', '10.0.0.0/8',
	  'sad', $1, '0044-03-15 BC', '00:00:00', '1901-12-13 20:45:52.000001', '1960-06-01 12:00:00+02',
	  '-1 year -2 mons +3 days -04:05:06.789', '00000000-0000-0000-0000-000000000000', 1,
	  '{}', '{NULL,"a,b","q\"uote","",NULL}', '{happy,NULL}', '{}', '{}')`,
	`INSERT INTO types VALUES (3, 32767, 2147483647, 9223372036854775807, '3.4028235e38', '1.7976931348623157e308',
	  9999999999.99, '1e100', 1234567890123456789012345678901234567890.0123456789,
	  true, repeat('ü', 3000), 'abcdefghij', 'abcde', repeat('x', 63), '[]', '[]', '::1', '2001:db8::/32',
	  'happy', '\x', '2100-12-31', '23:59:59.999999', '2100-01-01 00:00:00.123456', '2150-07-04 01:02:03.456789+00',
	  '1000 years 11 mons 30 days 23:59:59.999999', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 2147483647,
	  '{1,NULL,3}', '{""}', '{sad,ok}', '{"1969-12-31 23:59:59.999999+00","2038-01-19 03:14:08+00"}', '{5,NULL}')`,
	`INSERT INTO types VALUES (4, 0, 0, 0, 'NaN', '-Infinity', 0, 'NaN', 0, NULL, '', '', '', '', 'null', '0', '0.0.0.0', '0.0.0.0/0',
	  'ok', '\x00ff', '1970-01-01', '12:00:00', '1970-01-01 00:00:00', '1970-01-01 00:00:00+00', '0', 
	  '123e4567-e89b-12d3-a456-426614174000', 42, '{-1}', '{"with space"}', '{}', '{NULL}', '{}')`,
}

// TestTypesRoundTrip writes every type of batch's mapping and reads it through the snapshot and
// through the stream: both give the same bytes, and both build the same Arrow columns.
func TestTypesRoundTrip(t *testing.T) {
	t.Parallel()
	raw := make([]byte, 1<<20)
	_, _ = rand.Read(raw)
	large := `\x` + hex.EncodeToString(raw)
	db := newTestDB(t, typesDDL)
	cfg := db.config(t, "types")
	info := setup(t, cfg)
	schema := info.Schemas[0]
	if _, err := batch.ArrowSchema(schema); err != nil {
		t.Fatalf("the test table must be fully mapped: %v", err)
	}
	for _, sql := range typeRows {
		if slices.Contains([]byte(sql), '$') {
			db.exec(t, sql, large)
		} else {
			db.exec(t, sql)
		}
	}
	snap, err := OpenSnapshot(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(context.Background())
	fromSnapshot := readAll(t, snap, schema, 2)
	fromStream := changesOf(stream(t, cfg, info.Schemas, db.walLSN(t)), "public.types")
	if len(fromSnapshot) != len(typeRows) || len(fromStream) != len(typeRows) {
		t.Fatalf("got %d snapshot rows and %d stream rows, want %d", len(fromSnapshot), len(fromStream), len(typeRows))
	}
	for i := range fromSnapshot {
		for j, c := range schema.Columns {
			s, st := fromSnapshot[i].Values[j], fromStream[i].Values[j]
			if s.Null != st.Null || s.Unchanged || st.Unchanged || string(s.Text) != string(st.Text) {
				t.Errorf("row %d column %s (%s): snapshot %q (null %v), stream %q (null %v)",
					i+1, c.Name, c.TypeName, short(s.Text), s.Null, short(st.Text), st.Null)
			}
		}
	}

	recS := buildRecord(t, schema, fromSnapshot)
	recT := buildRecord(t, schema, fromStream)
	for j, c := range schema.Columns {
		// NaN equals NaN here: the question is whether both paths decode the same value.
		if !array.ApproxEqual(recS.Column(j), recT.Column(j), array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
			t.Errorf("column %s: the Arrow values of the two paths differ", c.Name)
		}
	}
	recB := copyRecord(t, snap, schema, KeyRange{}, 2)
	for j, c := range schema.Columns {
		if !array.ApproxEqual(recB.Column(j), recT.Column(j), array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
			t.Errorf("column %s: the binary COPY's Arrow values differ from the stream's:\ncopy   %v\nstream %v", c.Name, recB.Column(j), recT.Column(j))
		}
	}
	checkArrowValues(t, schema, recS, raw)
}

func short(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

func buildRecord(t *testing.T, schema batch.Schema, rows []batch.Change) arrow.RecordBatch {
	t.Helper()
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rb.Release)
	rec, err := rb.Build(rows, time.Now())
	if err != nil {
		t.Fatalf("building the Arrow record: %v", err)
	}
	t.Cleanup(rec.Release)
	return rec
}

// checkArrowValues spot-checks values that are easy to get wrong.
func checkArrowValues(t *testing.T, schema batch.Schema, rec arrow.RecordBatch, largeBytea []byte) {
	t.Helper()
	col := func(name string) arrow.Array {
		i := slices.IndexFunc(schema.Columns, func(c batch.Column) bool { return c.Name == name })
		return rec.Column(i)
	}
	for j := 1; j < len(schema.Columns); j++ {
		if !col(schema.Columns[j].Name).IsNull(0) {
			t.Errorf("row 1 column %s: want NULL", schema.Columns[j].Name)
		}
	}
	i8 := col("i8").(*array.Int64)
	if i8.Value(1) != math.MinInt64 || i8.Value(2) != math.MaxInt64 {
		t.Errorf("int8 limits: %d %d", i8.Value(1), i8.Value(2))
	}
	f8 := col("f8").(*array.Float64)
	if f8.Value(1) != -math.MaxFloat64 || !math.IsInf(f8.Value(3), -1) {
		t.Errorf("float8: %v %v", f8.Value(1), f8.Value(3))
	}
	if f4 := col("f4").(*array.Float32); !math.IsNaN(float64(f4.Value(3))) || f4.Value(2) != math.MaxFloat32 {
		t.Errorf("float4: %v %v", f4.Value(2), f4.Value(3))
	}
	if s := col("t").(*array.String); s.Value(1) != "héllo wörld — 日本語 🎉" || s.Value(3) != "" || s.IsNull(3) {
		t.Errorf("text: %q %q", s.Value(1), s.Value(3))
	}
	if s := col("bp").(*array.String); s.Value(1) != "x    " {
		t.Errorf("bpchar keeps its padding: %q", s.Value(1))
	}
	by := col("by").(*array.Binary)
	if !slices.Equal(by.Value(1), largeBytea) || len(by.Value(2)) != 0 || by.IsNull(2) {
		t.Errorf("bytea: %d bytes, want %d; empty %d", len(by.Value(1)), len(largeBytea), len(by.Value(2)))
	}
	ts := col("ts").(*array.Timestamp)
	if want := time.Date(1901, 12, 13, 20, 45, 52, 1000, time.UTC).UnixMicro(); int64(ts.Value(1)) != want {
		t.Errorf("timestamp before 1970: %d, want %d", ts.Value(1), want)
	}
	tstz := col("tstz").(*array.Timestamp)
	if want := time.Date(1960, 6, 1, 10, 0, 0, 0, time.UTC).UnixMicro(); int64(tstz.Value(1)) != want {
		t.Errorf("timestamptz before 1970: %d, want %d", tstz.Value(1), want)
	}
	if want := time.Date(2150, 7, 4, 1, 2, 3, 456789000, time.UTC).UnixMicro(); int64(tstz.Value(2)) != want {
		t.Errorf("timestamptz after 2038: %d, want %d", tstz.Value(2), want)
	}
	if d := col("d").(*array.Date32); d.Value(2) != arrow.Date32FromTime(time.Date(2100, 12, 31, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("date 2100-12-31: %d", d.Value(2))
	}
	ia := col("ia").(*array.List)
	if ia.IsNull(1) || listLen(ia, 1) != 0 || listLen(ia, 2) != 3 || !ia.ListValues().IsNull(1) {
		t.Errorf("int[]: empty array must be an empty list, {1,NULL,3} three elements with a NULL")
	}
	ta := col("ta").(*array.List)
	tv := ta.ListValues().(*array.String)
	start, _ := ta.ValueOffsets(1)
	if listLen(ta, 1) != 5 || !tv.IsNull(int(start)) || tv.Value(int(start)+1) != "a,b" || tv.Value(int(start)+2) != `q"uote` || tv.Value(int(start)+3) != "" {
		t.Errorf("text[] with NULLs, commas, quotes and empty strings decoded wrong")
	}
	if ea := col("ea").(*array.List); listLen(ea, 2) != 2 {
		t.Errorf("enum[]: %d elements", listLen(ea, 2))
	}
	if dom := col("dom").(*array.Int32); dom.Value(2) != math.MaxInt32 {
		t.Errorf("domain over int: %d", dom.Value(2))
	}
	if n := col("n").(*array.String); len(n.Value(2)) != 101 || n.Value(2)[:4] != "1000" || n.Value(3) != "NaN" {
		t.Errorf("unconstrained numeric: %q %q", short([]byte(n.Value(2))), n.Value(3))
	}
}

func listLen(l *array.List, i int) int {
	s, e := l.ValueOffsets(i)
	return int(e - s)
}
