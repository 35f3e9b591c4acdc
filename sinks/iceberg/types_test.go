package iceberg

import (
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
)

// TestAllTypes writes every type the batch mapping produces, with a composite uuid + text key,
// through snapshot and stream batches, and reads it back with deletes applied.
func TestAllTypes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cols := []struct {
		col batch.Column
		val string
	}{
		{batch.Column{Name: "k_uuid", TypeOID: 2950, TypeName: "uuid", Key: true, NotNull: true}, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{batch.Column{Name: "k_text", TypeOID: 25, TypeName: "text", Key: true, NotNull: true}, ""},
		{batch.Column{Name: "c_bool", TypeOID: 16, TypeName: "boolean"}, "t"},
		{batch.Column{Name: "c_int2", TypeOID: 21, TypeName: "smallint"}, "-12"},
		{batch.Column{Name: "c_int8", TypeOID: 20, TypeName: "bigint"}, "9007199254740993"},
		{batch.Column{Name: "c_f4", TypeOID: 700, TypeName: "real"}, "1.5"},
		{batch.Column{Name: "c_f8", TypeOID: 701, TypeName: "double precision"}, "NaN"},
		{batch.Column{Name: "c_num", TypeOID: 1700, TypeName: "numeric(10,3)", TypeMod: (10<<16 | 3) + 4}, "-1234567.891"},
		{batch.Column{Name: "c_numtext", TypeOID: 1700, TypeName: "numeric", TypeMod: -1}, "123456789012345678901234567890123456789012.5"},
		{batch.Column{Name: "c_bytea", TypeOID: 17, TypeName: "bytea"}, `\x0102ff`},
		{batch.Column{Name: "c_date", TypeOID: 1082, TypeName: "date"}, "1967-02-28"},
		{batch.Column{Name: "c_time", TypeOID: 1083, TypeName: "time without time zone"}, "13:45:00.123456"},
		{batch.Column{Name: "c_ts", TypeOID: 1114, TypeName: "timestamp without time zone"}, "2024-02-29 13:45:00.123456"},
		{batch.Column{Name: "c_tstz", TypeOID: 1184, TypeName: "timestamp with time zone"}, "2024-02-29 13:45:00.123456+00"},
		{batch.Column{Name: "c_jsonb", TypeOID: 3802, TypeName: "jsonb"}, `{"a": [1, 2]}`},
		{batch.Column{Name: "c_ints", TypeOID: 1007, TypeName: "integer[]"}, "{1,NULL,3}"},
		{batch.Column{Name: "c_texts", TypeOID: 1009, TypeName: "text[]"}, `{a,"b c"}`},
		// Iceberg has no interval type: its ISO 8601 text, each component with its own sign.
		{batch.Column{Name: "c_interval", TypeOID: 1186, TypeName: "interval"}, "1 year 2 mons -3 days +04:05:06.5"},
		{batch.Column{Name: "c_intervals", TypeOID: 1187, TypeName: "interval[]"}, `{"00:00:01",NULL,"-1 days"}`},
	}
	spec := sinks.TableSpec{Target: "raw.all_types", Schema: batch.Schema{Table: batch.TableName{Schema: "shop", Name: "all_types"}}}
	for _, c := range cols {
		spec.Schema.Columns = append(spec.Schema.Columns, c.col)
	}
	if err := h.sink.EnsureTable(t.Context(), spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	h.spec = spec
	mk := func(op batch.Op, key string) batch.Change {
		c := batch.Change{Op: op}
		for i, col := range cols {
			v := sinktest.Text(col.val)
			switch {
			case i == 1:
				v = sinktest.Text(key)
			case op == batch.OpDelete && i > 1:
				v = batch.Value{Null: true}
			}
			c.Values = append(c.Values, v)
		}
		return c
	}
	steps := []struct {
		phase   batch.Phase
		changes []batch.Change
	}{
		{batch.PhaseSnapshot, []batch.Change{mk(batch.OpSnapshot, "a"), mk(batch.OpSnapshot, "b"), mk(batch.OpSnapshot, "c")}},
		{batch.PhaseSnapshot, []batch.Change{mk(batch.OpSnapshot, "d")}},
		{batch.PhaseStream, []batch.Change{mk(batch.OpDelete, "a"), mk(batch.OpUpdate, "b"), mk(batch.OpInsert, "e")}},
		{batch.PhaseStream, []batch.Change{mk(batch.OpDelete, "c"), mk(batch.OpDelete, "zz")}},
	}
	for i, st := range steps {
		if err := h.sink.Apply(t.Context(), h.batch(st.phase, st.changes...)); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	tbl := h.table()
	got, err := tbl.Scan(table.WithSelectedFields("k_text", "c_num", "c_int2", "c_date", "c_texts", "c_interval", "c_intervals")).ToArrowTable(t.Context())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer got.Release()
	if got.NumRows() != 3 {
		t.Errorf("%d rows visible, want 3 (b, d, e)", got.NumRows())
	}
	var keys []string
	for _, chunk := range got.Column(got.Schema().FieldIndices("k_text")[0]).Data().Chunks() {
		for i := range chunk.Len() {
			keys = append(keys, chunk.ValueStr(i))
		}
	}
	if s := strings.Join(keys, ","); len(keys) != 3 || !strings.Contains(s, "b") || !strings.Contains(s, "d") || !strings.Contains(s, "e") {
		t.Errorf("visible keys %v, want b, d and e", keys)
	}
	for name, want := range map[string]string{"c_num": "-1234567.891", "c_int2": "-12", "c_date": "1967-02-28", "c_texts": `["a","b c"]`,
		"c_interval": "P1Y2M-3DT4H5M6.5S", "c_intervals": `["PT1S",null,"P-1D"]`} {
		idx := got.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Errorf("scan lacks %s", name)
			continue
		}
		if v := got.Column(idx[0]).Data().Chunk(0).ValueStr(0); v != want {
			t.Errorf("%s reads back as %s, want %s", name, v, want)
		}
	}
	t.Logf("schema: %s", tbl.Schema())
}
