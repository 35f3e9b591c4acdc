package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// examples lists the example configs of the repository.
func examples(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found in ../examples: %v", err)
	}
	return files
}

// exampleEnv returns the environment an example expects: a placeholder for every password or
// secret key variable its comments name (the secrets it keeps out of the file).
func exampleEnv(doc string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		secret := strings.HasSuffix(name, "_PASSWORD") || strings.HasSuffix(name, "_SECRET_ACCESS_KEY")
		if secret && strings.Contains(doc, name) {
			return "example-secret", true
		}
		return "", false
	}
}

func TestExamplesLoad(t *testing.T) {
	t.Parallel()
	for _, f := range examples(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parse(strings.NewReader(string(data)), "yaml", exampleEnv(string(data))); err != nil {
				t.Fatalf("example %s does not load:\n%v", f, err)
			}
		})
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parse(strings.NewReader(string(data)), "yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Pipeline: "demo",
		Source: Source{
			DSN:                 "postgres://postgres@127.0.0.1:5432/demo?sslmode=disable",
			Slot:                "sluice_demo",
			Publication:         "sluice_demo",
			SnapshotChunkRows:   50000,
			SnapshotChunkBytes:  16 * MiB,
			SnapshotParallelism: 1,
		},
		Temporal: Temporal{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "sluice"},
		Staging:  Staging{URL: ".stack/demo/staging"},
		Batch:    Batch{MaxRows: 100000, MaxBytes: 64 * MiB, MaxWait: Duration(time.Second)},
		Sink: Sink{Type: "iceberg", Iceberg: &Iceberg{
			Catalog:             IcebergCatalog{Type: "sql", URI: ".stack/demo/catalog.db", Dialect: "sqlite", Name: "demo"},
			Warehouse:           ".stack/demo/warehouse",
			Maintenance:         IcebergMaintenance{CompactEveryCommits: 100, ExpireSnapshotsAfter: Duration(24 * time.Hour), RemoveOrphansAfter: Duration(time.Hour)},
			CompressionLevel:    1,
			TargetFileSizeBytes: 128 * MiB,
		}},
		Tables: []Table{{
			Source:   "public.orders",
			Target:   "raw.orders",
			Metadata: []sinks.MetadataColumn{{From: "commit_ts", As: "committed_at"}},
		}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("demo config:\n got %#v\nwant %#v", mustJSON(t, c), mustJSON(t, want))
	}
}

// mustJSON encodes v with its secrets, for test messages.
func mustJSON(t *testing.T, v *Config) string {
	t.Helper()
	type plain Config
	b, err := json.Marshal((*plain)(v))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edits []edit
		check func(c *Config) (got, want any)
	}{
		{"slot", nil, func(c *Config) (any, any) { return c.Source.Slot, "sluice_demo" }},
		{"slot with dash", []edit{set("pipeline", "orders-to-lake")}, func(c *Config) (any, any) { return c.Source.Slot, "sluice_orders_to_lake" }},
		{"publication", []edit{set("source.slot", "my_slot")}, func(c *Config) (any, any) { return c.Source.Publication, "sluice_demo" }},
		{"chunk rows", nil, func(c *Config) (any, any) { return c.Source.SnapshotChunkRows, 50000 }},
		{"temporal", nil, func(c *Config) (any, any) {
			return c.Temporal, Temporal{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "sluice-demo"}
		}},
		{"task queue follows the pipeline", []edit{set("pipeline", "orders-to-lake")}, func(c *Config) (any, any) { return c.Temporal.TaskQueue, "sluice-orders-to-lake" }},
		{"batch", nil, func(c *Config) (any, any) { return c.Batch, Batch{100000, 64 << 20, Duration(time.Second)} }},
		{"sql dialect", nil, func(c *Config) (any, any) { return c.Sink.Iceberg.Catalog.Dialect, "sqlite" }},
		{"catalog name", nil, func(c *Config) (any, any) { return c.Sink.Iceberg.Catalog.Name, "sluice" }},
		{"rest has no dialect", []edit{set("sink.iceberg.catalog", map[string]any{"type": "rest", "uri": "http://h:8181"})}, func(c *Config) (any, any) { return c.Sink.Iceberg.Catalog.Dialect, "" }},
		{"maintenance", nil, func(c *Config) (any, any) {
			return c.Sink.Iceberg.Maintenance, IcebergMaintenance{100, Duration(24 * time.Hour), Duration(time.Hour)}
		}},
		{"clickhouse", []edit{clickhouseSink()}, func(c *Config) (any, any) {
			return *c.Sink.ClickHouse, ClickHouse{Addr: "127.0.0.1:9000", Database: "default", Username: "default", Schema: "auto",
				DialTimeout: Duration(10 * time.Second), ReadTimeout: Duration(5 * time.Minute), MaxOpenConns: 8}
		}},
		{"couchbase", []edit{sinkOf("couchbase", couchbaseSink())}, func(c *Config) (any, any) {
			cb := *c.Sink.Couchbase
			return []any{cb.Scope, cb.MetadataCollection, cb.Durability, cb.Concurrency, cb.Timeout},
				[]any{"_default", "sluice_meta", "majority", 32, Duration(30 * time.Second)}
		}},
		{"iceberg files", nil, func(c *Config) (any, any) {
			ice := c.Sink.Iceberg
			return []any{ice.CompressionLevel, ice.PartitionBuckets, ice.TargetFileSizeBytes}, []any{1, 0, 128 * MiB}
		}},
		{"empty metadata is none", []edit{set("tables.0.metadata", []any{})}, func(c *Config) (any, any) { return c.Tables[0].Metadata == nil, true }},
		{"no key override", nil, func(c *Config) (any, any) { return c.Tables[0].Key == nil, true }},
		{"set values kept", []edit{set("batch", map[string]any{"max_rows": 10, "max_bytes": "1.5KiB", "max_wait": "250ms"})}, func(c *Config) (any, any) {
			return c.Batch, Batch{10, 1536, Duration(250 * time.Millisecond)}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := baseInput()
			for _, e := range tc.edits {
				e(in)
			}
			data, _ := json.Marshal(in)
			c, err := FromJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tc.check(c); !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	yaml := `
pipeline: demo
source: {dsn: "postgres://sluice@db:5432/shop"}
staging: {url: /staging}
sink:
  type: clickhouse
  clickhouse: {addr: "ch:9000"}
tables: [{source: public.orders, target: orders}]
`
	tests := []struct {
		name  string
		env   map[string]string
		check func(c *Config) (got, want any)
		want  []want // problems, when the override is invalid
	}{
		{"dsn", map[string]string{"SLUICE_SOURCE_DSN": "postgres://sluice:s3cret@db:5432/shop"},
			func(c *Config) (any, any) { return c.Source.DSN, "postgres://sluice:s3cret@db:5432/shop" }, nil},
		{"password of the chosen sink", map[string]string{"SLUICE_SINK_CLICKHOUSE_PASSWORD": "pw"},
			func(c *Config) (any, any) { return c.Sink.ClickHouse.Password, "pw" }, nil},
		{"number", map[string]string{"SLUICE_BATCH_MAX_ROWS": "5000"},
			func(c *Config) (any, any) { return c.Batch.MaxRows, 5000 }, nil},
		{"size", map[string]string{"SLUICE_BATCH_MAX_BYTES": "8MiB"},
			func(c *Config) (any, any) { return c.Batch.MaxBytes, 8 * MiB }, nil},
		{"duration", map[string]string{"SLUICE_BATCH_MAX_WAIT": "5s"},
			func(c *Config) (any, any) { return c.Batch.MaxWait, Duration(5 * time.Second) }, nil},
		{"boolean", map[string]string{"SLUICE_SINK_CLICKHOUSE_TLS_ENABLED": "true"},
			func(c *Config) (any, any) { return c.Sink.ClickHouse.TLS, ClickHouseTLS{TLS: TLS{Enabled: true}} }, nil},
		{"enabled shorthand", map[string]string{"SLUICE_SINK_CLICKHOUSE_TLS": "true"},
			func(c *Config) (any, any) { return c.Sink.ClickHouse.TLS, ClickHouseTLS{TLS: TLS{Enabled: true}} }, nil},
		{"tls section", map[string]string{"SLUICE_SINK_CLICKHOUSE_TLS_CA_FILE": "/ca.pem", "SLUICE_SINK_CLICKHOUSE_TLS_SERVER_NAME": "ch.internal"},
			func(c *Config) (any, any) {
				return c.Sink.ClickHouse.TLS, ClickHouseTLS{TLS: TLS{CAFile: "/ca.pem", ServerName: "ch.internal"}}
			}, nil},
		{"temporal", map[string]string{"SLUICE_TEMPORAL_ADDRESS": "temporal:7233", "SLUICE_TEMPORAL_TASK_QUEUE": "q2"},
			func(c *Config) (any, any) {
				return c.Temporal, Temporal{Address: "temporal:7233", Namespace: "default", TaskQueue: "q2"}
			}, nil},
		{"empty is unset", map[string]string{"SLUICE_SOURCE_DSN": ""},
			func(c *Config) (any, any) { return c.Source.DSN, "postgres://sluice@db:5432/shop" }, nil},
		{"invalid value names the variable", map[string]string{"SLUICE_BATCH_MAX_ROWS": "lots"}, nil,
			[]want{{"batch.max_rows", `want a whole number, got "lots" (set by environment variable SLUICE_BATCH_MAX_ROWS)`}}},
		{"file's mistake above a variable stays visible", map[string]string{"SLUICE_BATCH_MAX_WAIT": "2s"}, nil,
			[]want{{"batch", "want a mapping of keys (max_rows, max_bytes, max_wait), got a list"}}},
		{"other sink's variable", map[string]string{"SLUICE_SINK_COUCHBASE_PASSWORD": "pw"}, nil,
			[]want{{"sink.couchbase", "not allowed with sink.type clickhouse; remove this section (and any SLUICE_SINK_COUCHBASE_* variable)"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			doc := yaml
			if strings.HasPrefix(tc.name, "file's mistake") {
				doc += "batch: [1]\n"
			}
			c, err := parse(strings.NewReader(doc), "yaml", lookup)
			if tc.want != nil {
				checkProblems(t, problemsOf(t, err), tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tc.check(c); !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

// TestParseReadsEnvironment checks that Parse (not only parse) reads the process environment.
func TestParseReadsEnvironment(t *testing.T) {
	t.Setenv("SLUICE_SOURCE_DSN", "postgres://from-env@db/shop")
	c, err := Load("../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Source.DSN != "postgres://from-env@db/shop" {
		t.Errorf("source.dsn = %q, want the value of SLUICE_SOURCE_DSN", c.Source.DSN)
	}
}

func TestEnvName(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"source.dsn":                                     "SLUICE_SOURCE_DSN",
		"sink.clickhouse.password":                       "SLUICE_SINK_CLICKHOUSE_PASSWORD",
		"sink.iceberg.s3.secret_access_key":              "SLUICE_SINK_ICEBERG_S3_SECRET_ACCESS_KEY",
		"sink.iceberg.catalog.uri":                       "SLUICE_SINK_ICEBERG_CATALOG_URI",
		"temporal.task_queue":                            "SLUICE_TEMPORAL_TASK_QUEUE",
		"sink.iceberg.maintenance.compact_every_commits": "SLUICE_SINK_ICEBERG_MAINTENANCE_COMPACT_EVERY_COMMITS",
	} {
		if got := EnvName(path); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", path, got, want)
		}
	}
	// Every key outside lists can be set from the environment.
	paths := leafPaths(reflect.TypeFor[Config](), "")
	for _, p := range []string{"pipeline", "source.dsn", "sink.couchbase.password", "sink.iceberg.s3.region", "batch.max_wait"} {
		found := false
		for _, q := range paths {
			found = found || q == p
		}
		if !found {
			t.Errorf("%s cannot be set from the environment; settable: %v", p, paths)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, f := range examples(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			fromYAML, err := parse(strings.NewReader(string(data)), "yaml", exampleEnv(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			js, err := json.Marshal(fromYAML)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := FromJSON(js)
			if err != nil {
				t.Fatalf("FromJSON of the encoded config: %v\n%s", err, js)
			}
			if !reflect.DeepEqual(fromYAML, fromJSON) {
				t.Errorf("YAML->JSON->struct changed the config:\n yaml %s\n json %s", mustJSON(t, fromYAML), mustJSON(t, fromJSON))
			}
			// What a Temporal data converter does: json.Unmarshal, then the workflow validates.
			var decoded Config
			if err := json.Unmarshal(js, &decoded); err != nil {
				t.Fatal(err)
			}
			if err := decoded.Validate(); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fromYAML, &decoded) {
				t.Errorf("json.Unmarshal changed the config:\n yaml %s\n json %s", mustJSON(t, fromYAML), mustJSON(t, &decoded))
			}
			// The JSON keys are the YAML keys: the encoding parses as a YAML config too.
			again, err := parse(strings.NewReader(string(js)), "yaml", noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fromYAML, again) {
				t.Errorf("JSON read as YAML changed the config")
			}
		})
	}
}

func TestUnmarshalJSONIsStrict(t *testing.T) {
	t.Parallel()
	var c Config
	err := json.Unmarshal([]byte(`{"pipeline": "demo", "batch": {"max_row": 5, "max_wait": 3}}`), &c)
	checkProblems(t, problemsOf(t, err), []want{
		{"batch.max_row", "unknown key"},
		{"batch.max_wait", "want a duration"},
	})
}

func TestValidateGoStruct(t *testing.T) {
	t.Parallel()
	c := &Config{
		Pipeline: "demo",
		Source:   Source{DSN: "host=db dbname=shop"},
		Staging:  Staging{URL: "s3://bucket/staging?endpoint=http://127.0.0.1:9000&region=us-east-1"},
		Sink:     Sink{Type: SinkPlugin, Plugin: &Plugin{Address: "127.0.0.1:50051"}},
		Tables:   []Table{{Source: "public.orders", Target: "orders"}},
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Batch.MaxRows != batch.DefaultMaxRows || c.Source.Slot != "sluice_demo" {
		t.Errorf("Validate did not apply defaults: %+v %+v", c.Batch, c.Source)
	}
	c.Batch.MaxRows = -1
	checkProblems(t, problemsOf(t, c.Validate()), []want{{"batch.max_rows", "is -1"}})
}

func TestNotAnObject(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`[]`, `"demo"`, `12`} {
		_, err := FromJSON([]byte(in))
		checkProblems(t, problemsOf(t, err), []want{{"", "want a mapping of keys (pipeline, source"}})
	}
	if _, err := FromJSON([]byte(`{} {}`)); err == nil || !strings.Contains(err.Error(), "unexpected data") {
		t.Errorf("trailing data: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("pipeline: demo\n  source: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, msg string }{
		{filepath.Join(dir, "c.toml"), "unknown file type; name it .yaml, .yml or .json"},
		{filepath.Join(dir, "missing.yaml"), "no such file"},
		{bad, "loading config " + bad + ": parsing yaml config"},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			t.Parallel()
			_, err := Load(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Load(%s) = %v, want an error containing %q", tc.path, err, tc.msg)
			}
		})
	}
	if _, err := Parse(strings.NewReader("{}"), "toml"); err == nil || !strings.Contains(err.Error(), `unknown format "toml"`) {
		t.Errorf("Parse toml: %v", err)
	}
}

func TestTableLookup(t *testing.T) {
	t.Parallel()
	c := &Config{Tables: []Table{
		{Source: "public.orders", Target: "raw.orders"},
		{Source: `shop."Order Items"`, Target: "raw.items", Key: []string{"order_id", `"Line"`}},
	}}
	tests := []struct {
		source string
		target string
		found  bool
	}{
		{"public.orders", "raw.orders", true},
		{"Public.Orders", "raw.orders", true},
		{`"public"."orders"`, "raw.orders", true},
		{`shop."Order Items"`, "raw.items", true},
		{`shop.order items`, "", false},
		{"orders", "", false},
		{"public.customers", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.source, func(t *testing.T) {
			t.Parallel()
			tab, ok := c.Table(tc.source)
			if ok != tc.found || tab.Target != tc.target {
				t.Errorf("Table(%q) = %q, %v; want %q, %v", tc.source, tab.Target, ok, tc.target, tc.found)
			}
		})
	}
	name, ok := c.Tables[1].SourceName()
	if !ok || name != (batch.TableName{Schema: "shop", Name: "Order Items"}) {
		t.Errorf("SourceName = %v, %v", name, ok)
	}
	if got := c.Tables[1].KeyColumns(); !reflect.DeepEqual(got, []string{"order_id", "Line"}) {
		t.Errorf("KeyColumns = %q", got)
	}
	if got := c.Tables[0].KeyColumns(); got != nil {
		t.Errorf("KeyColumns without override = %q, want nil", got)
	}
}
