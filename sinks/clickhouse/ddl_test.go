package clickhouse

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
)

// typesSpec is a table with one column of every mapped type and two metadata columns.
func typesSpec(target string) sinks.TableSpec {
	return sinks.TableSpec{
		Target: target,
		Schema: batch.Schema{
			Table: batch.TableName{Schema: "shop", Name: "types"},
			Columns: []batch.Column{
				{Name: "id", TypeOID: 20, TypeName: "bigint", NotNull: true, Key: true},
				{Name: "region", TypeOID: 25, TypeName: "text", NotNull: true, Key: true},
				{Name: "small", TypeOID: 21, TypeName: "smallint"},
				{Name: "qty", TypeOID: 23, TypeName: "integer"},
				{Name: "ratio", TypeOID: 700, TypeName: "real"},
				{Name: "score", TypeOID: 701, TypeName: "double precision"},
				{Name: "price", TypeOID: 1700, TypeName: "numeric(12,2)", TypeMod: (12<<16 | 2) + 4},
				{Name: "exact", TypeOID: 1700, TypeName: "numeric", TypeMod: -1},
				{Name: "ok", TypeOID: 16, TypeName: "boolean"},
				{Name: "doc", TypeOID: 3802, TypeName: "jsonb"},
				{Name: "blob", TypeOID: 17, TypeName: "bytea"},
				{Name: "uid", TypeOID: 2950, TypeName: "uuid"},
				{Name: "born", TypeOID: 1082, TypeName: "date"},
				{Name: "at", TypeOID: 1114, TypeName: "timestamp without time zone"},
				{Name: "atz", TypeOID: 1184, TypeName: "timestamp with time zone"},
				{Name: "clock", TypeOID: 1083, TypeName: "time without time zone"},
				{Name: "span", TypeOID: 1186, TypeName: "interval"},
				{Name: "tags", TypeOID: 1009, TypeName: "text[]"},
				{Name: "nums", TypeOID: 1007, TypeName: "integer[]"},
			},
		},
		Metadata: []sinks.MetadataColumn{{From: "commit_ts", As: "committed_at"}, {From: "op", As: "source_op"}},
	}
}

// TestCreateTableSQL pins the DDL of both layouts. The modern one cannot run on the test server
// (18.16); it runs on ClickHouse 26.7 in TestModernLayoutOnChdb. The compatible one also runs in
// the integration tests.
func TestCreateTableSQL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		modern bool
		golden string
	}{
		{"modern", true, "create_modern.sql"},
		{"compatible", false, "create_compatible.sql"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := newLayout(typesSpec("raw.types"), "raw", "types", tc.modern)
			if err != nil {
				t.Fatal(err)
			}
			got := l.createTableSQL() + "\n"
			path := filepath.Join("testdata", tc.golden)
			if os.Getenv("UPDATE_GOLDEN") != "" {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading golden file (set UPDATE_GOLDEN=1 to write it): %v", err)
			}
			if got != string(want) {
				t.Errorf("DDL changed; if intended, rerun with UPDATE_GOLDEN=1.\ngot:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestModernDDLEssentials(t *testing.T) {
	t.Parallel()
	l, err := newLayout(typesSpec("raw.types"), "raw", "types", true)
	if err != nil {
		t.Fatal(err)
	}
	ddl := l.createTableSQL()
	for _, want := range []string{
		"ENGINE = ReplacingMergeTree(`_version`, `_is_deleted`)",
		"ORDER BY (`id`, `region`, `_sluice_marker`)",
		"`born` Nullable(Date32)",
		"`at` Nullable(DateTime64(6, 'UTC'))",
		"`committed_at` Nullable(DateTime64(6, 'UTC'))",
		"`ok` Nullable(Bool)",
		"`tags` Array(Nullable(String))",
		"`id` Int64,",
		"`region` String,",
	} {
		if !strings.Contains(ddl, want) {
			t.Errorf("modern DDL lacks %q:\n%s", want, ddl)
		}
	}
	if strings.Contains(ddl, "DateTime(") || strings.Contains(ddl, " Date)") {
		t.Errorf("modern DDL uses a legacy date type:\n%s", ddl)
	}
}

func TestLayoutRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(*sinks.TableSpec)
		want string
	}{
		{"no key", func(s *sinks.TableSpec) {
			s.Schema.Columns[0].Key, s.Schema.Columns[1].Key = false, false
		}, "has no key column"},
		{"internal name", func(s *sinks.TableSpec) { s.Schema.Columns[3].Name = ColVersion }, "clashes with the sink's own column"},
		{"metadata clash", func(s *sinks.TableSpec) { s.Metadata[0].As = "qty" }, `metadata column "qty" clashes with column`},
		{"unknown metadata", func(s *sinks.TableSpec) { s.Metadata[0].From = "lsn" }, "is not a context column"},
		{"backquote", func(s *sinks.TableSpec) { s.Schema.Columns[3].Name = "a`b" }, "cannot be a ClickHouse column name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := typesSpec("t")
			tc.edit(&spec)
			_, err := newLayout(spec, "default", "t", true)
			if err == nil || !sinks.IsPoison(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("newLayout: got %v, want poison containing %q", err, tc.want)
			}
		})
	}
}

// TestTimestampKeyNeedsTheModernLayout: the compatible layout's DateTime keeps whole seconds, so a
// timestamp key column would merge keys within one second into one row: refused (poison naming
// the table, the column and the modern layout), at CheckLayout (sluice check) as at EnsureTable.
// The modern layout's DateTime64(6) holds it; other key types are fine on both.
func TestTimestampKeyNeedsTheModernLayout(t *testing.T) {
	t.Parallel()
	withKey := func(names ...string) sinks.TableSpec {
		spec := typesSpec("raw.types")
		for i := range spec.Schema.Columns {
			c := &spec.Schema.Columns[i]
			c.Key = slices.Contains(names, c.Name)
		}
		return spec
	}
	for _, tc := range []struct {
		name   string
		key    []string
		modern bool
		want   string // "" for accepted
	}{
		{"timestamptz key, compatible", []string{"id", "atz"}, false, `table shop.types: key column "atz" (timestamp with time zone) cannot be a key of the ClickHouse compatible layout`},
		{"timestamp key, compatible", []string{"at"}, false, "sink.clickhouse.schema: modern, ClickHouse 23.2 or later"},
		{"timestamptz key, modern", []string{"id", "atz"}, true, ""},
		{"timestamp column not in the key, compatible", []string{"id"}, false, ""},
		{"date key, compatible (whole days are exact)", []string{"born"}, false, ""},
		{"text and bigint key, compatible", []string{"id", "region"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckLayout(withKey(tc.key...), "default", tc.modern)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckLayout: %v", err)
				}
				return
			}
			if err == nil || !sinks.IsPoison(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckLayout: got %v, want poison containing %q", err, tc.want)
			}
			for _, w := range []string{"whole seconds", "two keys within one second would become one row", "tables[].key", "sluice resync --table shop.types"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q: %v", w, err)
				}
			}
		})
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	l, err := newLayout(typesSpec("t"), "default", "t", false)
	if err != nil {
		t.Fatal(err)
	}
	full := func() existing {
		e := existing{engine: "ReplacingMergeTree", engineFull: "ReplacingMergeTree(_version) ORDER BY (id, region, _sluice_marker)",
			sortingKey: "id, region, _sluice_marker", columns: map[string]string{}}
		for _, c := range l.cols {
			e.columns[c.name] = c.typ
		}
		return e
	}
	for _, tc := range []struct {
		name    string
		edit    func(*existing)
		wantAdd []string
		wantErr string
	}{
		{"same", func(*existing) {}, nil, ""},
		{"new columns", func(e *existing) { delete(e.columns, "qty"); delete(e.columns, "committed_at") }, []string{"qty", "committed_at"}, ""},
		{"type changed", func(e *existing) { e.columns["qty"] = "Nullable(Int64)" }, nil, `column "qty" is Nullable(Int64)`},
		{"key changed", func(e *existing) { e.sortingKey = "id, _sluice_marker" }, nil, "cannot change a table's sorting key"},
		{"key column missing", func(e *existing) { delete(e.columns, "region") }, nil, `column "region" (String) is missing`},
		{"sink column missing", func(e *existing) { delete(e.columns, ColMarker) }, nil, `column "_sluice_marker" (UInt8) is missing`},
		{"extra column kept", func(e *existing) { e.columns["dropped"] = "Nullable(String)" }, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := full()
			tc.edit(&e)
			add, err := l.diff(e)
			if tc.wantErr != "" {
				if err == nil || !sinks.IsPoison(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("diff: got %v, want poison containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range add {
				names = append(names, c.name)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantAdd, ",") {
				t.Errorf("columns to add: got %v, want %v", names, tc.wantAdd)
			}
		})
	}
}

func TestTableModern(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine, full string
		modern       bool
		poison       bool
	}{
		{"ReplacingMergeTree", "ReplacingMergeTree(_version, _is_deleted) ORDER BY (id, _sluice_marker) SETTINGS index_granularity = 8192", true, false},
		{"ReplacingMergeTree", "ReplacingMergeTree(_version) ORDER BY (id, _sluice_marker) SETTINGS index_granularity = 8192", false, false},
		{"MergeTree", "MergeTree ORDER BY id", false, true},
		{"ReplacingMergeTree", "ReplacingMergeTree(ver) ORDER BY id", false, true},
	} {
		t.Run(tc.full, func(t *testing.T) {
			t.Parallel()
			modern, err := tableModern(existing{engine: tc.engine, engineFull: tc.full}, "db", "t")
			if tc.poison != (err != nil && sinks.IsPoison(err)) || (err == nil && modern != tc.modern) {
				t.Fatalf("tableModern(%s): got %v, %v", tc.full, modern, err)
			}
		})
	}
}

func TestVersionAndSchemaChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version, schema string
		modern          bool
		wantErr         string
	}{
		{"18.16.1", config.SchemaAuto, false, ""},
		{"18.16.1", config.SchemaCompatible, false, ""},
		{"18.16.1", config.SchemaModern, false, "runs ClickHouse 18.16.1, which has no ReplacingMergeTree(version, is_deleted)"},
		{"23.1.3.5", config.SchemaAuto, false, ""},
		{"23.2.1.2537", config.SchemaAuto, true, ""},
		{"24.8.4.13", config.SchemaModern, true, ""},
		{"24.8.4.13", config.SchemaCompatible, false, ""},
	} {
		t.Run(tc.version+"/"+tc.schema, func(t *testing.T) {
			t.Parallel()
			v, err := ParseVersion(tc.version)
			if err != nil {
				t.Fatal(err)
			}
			modern, err := chooseSchema(tc.schema, v, "ch:9000")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "sink.clickhouse.schema") {
					t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || modern != tc.modern {
				t.Fatalf("got %v, %v; want %v", modern, err, tc.modern)
			}
		})
	}
	if _, err := ParseVersion("banana"); err == nil {
		t.Error("ParseVersion(banana) succeeded")
	}
}

// TestNewValidatesWithConfig checks that New refuses an invalid section with package config's
// problems (one validator, full key paths), as poison, before connecting.
func TestNewValidatesWithConfig(t *testing.T) {
	t.Parallel()
	_, err := New(t.Context(), Config{Addr: "nohost", Database: "raw-data", Schema: "newest"}, nil)
	var ce *config.Error
	if !errors.As(err, &ce) || !sinks.IsPoison(err) {
		t.Fatalf("New: %v, want a poison *config.Error", err)
	}
	for _, want := range []string{"sink.clickhouse.addr", "sink.clickhouse.database", "sink.clickhouse.schema"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New: got %v, want a problem with %s", err, want)
		}
	}
}

func TestSplitTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ target, db, name string }{
		{"orders", "default", "orders"},
		{"raw.orders", "raw", "orders"},
		{"raw.ord-ers", "", ""},
		{"a.b.c", "", ""},
	} {
		db, name, err := splitTarget(tc.target, "default")
		if (err != nil) != (tc.db == "") || db != tc.db || name != tc.name {
			t.Errorf("splitTarget(%q) = %q, %q, %v", tc.target, db, name, err)
		}
	}
}
