package config

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicecdc/sluice/batch"
)

// keyPaths lists every key path of t as docs/config.md writes it, with [] for list entries.
func keyPaths(t reflect.Type, prefix string) []string {
	var out []string
	for _, f := range keyFields(t) {
		p := joinKey(prefix, jsonKey(f))
		out = append(out, p)
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			p += "[]"
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(rawDecoderType) {
			out = append(out, keyPaths(ft, p)...)
		}
	}
	return out
}

// docKey is a row of a reference table of docs/config.md.
type docKey struct {
	path string // as the docs write it: sink.iceberg.catalog.uri, tables[].metadata[].from
	typ  string // the Type column
}

// docKeys reads the rows of docs/config.md's key tables (those headed "| Key | Type | Default |
// Meaning |") in order.
func docKeys(t *testing.T, doc string) []docKey {
	t.Helper()
	var keys []docKey
	inKeys := false
	row := regexp.MustCompile("^\\| `([^`]+)` \\| ([^|]*) \\|")
	for line := range strings.Lines(doc) {
		line = strings.TrimSpace(line)
		switch {
		case !strings.HasPrefix(line, "|"):
			inKeys = false
		case strings.HasPrefix(line, "| Key | Type | Default | Meaning |"):
			inKeys = true
		case inKeys:
			if m := row.FindStringSubmatch(line); m != nil {
				keys = append(keys, docKey{path: m[1], typ: strings.TrimSpace(m[2])})
			}
		}
	}
	if len(keys) < 40 {
		t.Fatalf("read %d keys from docs/config.md; did its tables change shape?", len(keys))
	}
	return keys
}

// docSamples is a valid value of every documented key that holds a value. A key documented
// without a sample fails TestDocsAndLoaderAgree until one is added here.
func docSamples() map[string]any {
	return map[string]any{
		"pipeline":                      "orders-to-lake",
		"source.dsn":                    "postgres://sluice@db.internal:5432/shop",
		"source.slot":                   "sluice_orders",
		"source.publication":            "sluice_orders",
		"source.snapshot_chunk_rows":    20000,
		"source.snapshot_chunk_bytes":   "8MiB",
		"source.snapshot_parallelism":   2,
		"source.max_parallel_backfills": 4,
		"temporal.address":              "127.0.0.1:7233",
		"temporal.namespace":            "cdc",
		"temporal.task_queue":           "sluice-orders",
		"temporal.api_key":              "k3y",
		"temporal.tls.enabled":          true,
		"temporal.tls.ca_file":          "/etc/sluice/temporal-ca.pem",
		"temporal.tls.cert_file":        "/etc/sluice/temporal.pem",
		"temporal.tls.key_file":         "/etc/sluice/temporal-key.pem",
		"temporal.tls.server_name":      "temporal.internal",
		"staging.url":                   "s3://lake/staging?endpoint=http://127.0.0.1:8333&region=us-east-1&path_style=true",
		"batch.max_rows":                5000,
		"batch.max_bytes":               "16MiB",
		"batch.max_wait":                "500ms",
		// sink.type and the catalog's type and uri come from the variant
		"sink.iceberg.catalog.dialect":                    "postgres",
		"sink.iceberg.catalog.name":                       "lake",
		"sink.iceberg.catalog.credential":                 "sluice:s3cret",
		"sink.iceberg.catalog.token":                      "t0ken",
		"sink.iceberg.warehouse":                          "s3://lake/warehouse",
		"sink.iceberg.s3.endpoint":                        "http://127.0.0.1:8333",
		"sink.iceberg.s3.region":                          "us-east-1",
		"sink.iceberg.s3.access_key_id":                   "sluice",
		"sink.iceberg.s3.secret_access_key":               "change-me",
		"sink.iceberg.compression_level":                  3,
		"sink.iceberg.partition_buckets":                  4,
		"sink.iceberg.target_file_size_bytes":             "256MiB",
		"sink.iceberg.maintenance.compact_every_commits":  50,
		"sink.iceberg.maintenance.expire_snapshots_after": "12h",
		"sink.clickhouse.addr":                            "clickhouse.internal:9000",
		"sink.clickhouse.database":                        "raw",
		"sink.clickhouse.username":                        "sluice",
		"sink.clickhouse.password":                        "change-me",
		"sink.clickhouse.tls.enabled":                     true,
		"sink.clickhouse.tls.ca_file":                     "/etc/sluice/clickhouse-ca.pem",
		"sink.clickhouse.tls.cert_file":                   "/etc/sluice/clickhouse.pem",
		"sink.clickhouse.tls.key_file":                    "/etc/sluice/clickhouse-key.pem",
		"sink.clickhouse.tls.server_name":                 "clickhouse.internal",
		"sink.clickhouse.schema":                          "compatible",
		"sink.clickhouse.dial_timeout":                    "5s",
		"sink.clickhouse.read_timeout":                    "10m",
		"sink.clickhouse.max_open_conns":                  16,
		"sink.couchbase.connstr":                          "couchbases://cb.internal",
		"sink.couchbase.username":                         "sluice",
		"sink.couchbase.password":                         "change-me",
		"sink.couchbase.bucket":                           "shop",
		"sink.couchbase.scope":                            "inventory",
		"sink.couchbase.metadata_collection":              "sluice_state",
		"sink.couchbase.durability":                       "persist_to_majority",
		"sink.couchbase.concurrency":                      64,
		"sink.couchbase.timeout":                          "1m",
		"sink.plugin.address":                             "127.0.0.1:50051",
		"sink.plugin.token":                               "t0ken",
		"sink.plugin.tls.enabled":                         true,
		"sink.plugin.tls.ca_file":                         "/etc/sluice/plugin-ca.pem",
		"sink.plugin.tls.cert_file":                       "/etc/sluice/plugin-client.pem",
		"sink.plugin.tls.key_file":                        "/etc/sluice/plugin-client-key.pem",
		"sink.plugin.tls.server_name":                     "plugin.internal",
		"sink.plugin.position_store.dsn":                  "postgres://sluice@state.internal:5432/sluice",
		"sink.plugin.position_store.schema":               "sluice_positions",
		"tables[].source":                                 "shop.orders",
		"tables[].target":                                 "raw.orders",
		"tables[].metadata[].from":                        "commit_ts",
		"tables[].metadata[].as":                          "committed_at",
		"tables[].key":                                    []any{"id"},
		"tables[].columns":                                []any{"id", "name"},
		"tables[].exclude_columns":                        []any{"secret"},
		"tables[].where":                                  "status <> 'archived'",
		"tables[].on_partition_change":                    "stop",
		"tables[].on_recreate":                            "resync",
		"tables[].on_drop_column":                         "keep",
		"tables[].on_rewrite":                             "stop",
		"tables[].iceberg.partition_by":                   []any{"truncate(4, name)", "bucket(16, id)"},
		"tables[].iceberg.sort_by":                        []any{"id desc"},
		"tables[].iceberg.properties[].key":               "write.metadata.previous-versions-max",
		"tables[].iceberg.properties[].value":             "20",
		"sink.iceberg.maintenance.remove_orphans_after":   "2h",
	}
}

// docVariants are the configs TestDocsAndLoaderAgree loads: one per sink, since only the chosen
// sink's section may be set, and the Iceberg sink twice, since a sql catalog and a rest catalog
// take different keys. Each sets every documented key that applies to it (tables[].columns and
// exclude_columns exclude each other: some variants set one, the others the other).
func docVariants() []struct {
	name, sink string
	set        map[string]any
	skip       []string
} {
	return []struct {
		name, sink string
		set        map[string]any
		skip       []string
	}{
		{"iceberg sql catalog", SinkIceberg, map[string]any{"sink.iceberg.catalog.type": "sql", "sink.iceberg.catalog.uri": "postgres://iceberg@db.internal:5432/catalog"},
			[]string{"sink.iceberg.catalog.credential", "sink.iceberg.catalog.token", "tables[].exclude_columns"}},
		{"iceberg rest catalog", SinkIceberg, map[string]any{"sink.iceberg.catalog.type": "rest", "sink.iceberg.catalog.uri": "https://catalog.internal/api"},
			[]string{"sink.iceberg.catalog.dialect", "tables[].exclude_columns"}},
		{"clickhouse", SinkClickHouse, nil, append([]string{"tables[].exclude_columns", "sink.clickhouse.tls.insecure_skip_verify"}, icebergTableKeys...)},
		{"clickhouse without verifying", SinkClickHouse, map[string]any{"sink.clickhouse.tls.insecure_skip_verify": true},
			append([]string{"tables[].exclude_columns", "sink.clickhouse.tls.ca_file", "sink.clickhouse.tls.server_name"}, icebergTableKeys...)},
		{"couchbase", SinkCouchbase, nil, append([]string{"tables[].columns"}, icebergTableKeys...)},
		{"plugin", SinkPlugin, nil, append([]string{"tables[].columns"}, icebergTableKeys...)},
	}
}

// icebergTableKeys are the tables[] keys only an Iceberg sink accepts.
var icebergTableKeys = []string{"tables[].iceberg.partition_by", "tables[].iceberg.sort_by",
	"tables[].iceberg.properties[].key", "tables[].iceberg.properties[].value"}

// secretFileKey reports whether path is the <key>_file of a documented secret <key>: it cannot
// be set beside its secret, so TestSecretFilesLoad loads it instead.
func secretFileKey(path string, documented map[string]bool) bool {
	secret, ok := strings.CutSuffix(path, SecretFileSuffix)
	return ok && documented[secret]
}

// setPath sets the key at path (in the docs' syntax, [] marking the one entry of a list) in tree.
func setPath(tree map[string]any, path string, value any) {
	segs := strings.Split(path, ".")
	cur := tree
	for _, seg := range segs[:len(segs)-1] {
		name, isList := strings.CutSuffix(seg, "[]")
		if isList {
			list, _ := cur[name].([]any)
			if list == nil {
				list = []any{map[string]any{}}
				cur[name] = list
			}
			cur = list[0].(map[string]any)
			continue
		}
		next, _ := cur[name].(map[string]any)
		if next == nil {
			next = map[string]any{}
			cur[name] = next
		}
		cur = next
	}
	cur[segs[len(segs)-1]] = value
}

// hasPath reports whether tree (a config encoded as JSON and decoded generically) holds a
// non-empty value at path.
func hasPath(tree any, path string) bool {
	cur := tree
	for seg := range strings.SplitSeq(path, ".") {
		name, isList := strings.CutSuffix(seg, "[]")
		m, _ := cur.(map[string]any)
		if cur = m[name]; cur == nil {
			return false
		}
		if isList {
			list, _ := cur.([]any)
			if len(list) == 0 {
				return false
			}
			cur = list[0]
		}
	}
	return cur != "" && cur != nil
}

// TestDocsAndLoaderAgree keeps docs/config.md and the loader one and the same: every key the
// docs list loads (in a config that sets every documented key with a valid value, once per sink)
// and lands in the Config, every key the loader accepts has a row, and every environment
// variable the docs name is the one that sets its key.
func TestDocsAndLoaderAgree(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	keys := docKeys(t, doc)
	documented := map[string]bool{}
	for _, k := range keys {
		documented[k.path] = true
	}

	// Every key the loader accepts is documented: by its own row, or (a mapping) by rows of the
	// keys inside it.
	accepted := map[string]bool{}
	for _, p := range keyPaths(reflect.TypeFor[Config](), "") {
		accepted[p] = true
		if !documented[p] && !slices.ContainsFunc(keys, func(k docKey) bool { return strings.HasPrefix(k.path, p+".") }) {
			t.Errorf("the loader accepts %s, but docs/config.md has no row for it", p)
		}
	}

	// Every documented key loads, with a valid value, and reaches the Config.
	var leaves []string
	for _, k := range keys {
		if !slices.ContainsFunc(keys, func(o docKey) bool {
			return strings.HasPrefix(o.path, k.path+".") || strings.HasPrefix(o.path, k.path+"[].")
		}) {
			leaves = append(leaves, k.path)
		}
	}
	samples := docSamples()
	loaded := map[string]bool{}
	failed := false
	for _, v := range docVariants() {
		tree := map[string]any{}
		setPath(tree, "sink.type", v.sink)
		var set []string
		for _, leaf := range leaves {
			other := strings.HasPrefix(leaf, "sink.") && leaf != "sink.type" && !strings.HasPrefix(leaf, "sink."+v.sink+".")
			if other || leaf == "sink.type" || slices.Contains(v.skip, leaf) || secretFileKey(leaf, documented) {
				continue
			}
			val, ok := v.set[leaf]
			if !ok {
				val, ok = samples[leaf]
			}
			if !ok {
				t.Errorf("docs/config.md documents %s, but docSamples has no valid value for it; add one", leaf)
				continue
			}
			setPath(tree, leaf, val)
			set = append(set, leaf)
		}
		data, _ := json.Marshal(tree)
		c, err := parse(strings.NewReader(string(data)), "yaml", noEnv)
		if err != nil {
			t.Errorf("%s: a config with every documented key does not load (a key refused here is documented but unknown to the loader, or its documented form is wrong):\n%v\nconfig: %s", v.name, err, data)
			failed = true
			continue
		}
		var back any
		if err := json.Unmarshal([]byte(mustJSON(t, c)), &back); err != nil {
			t.Fatal(err)
		}
		for _, leaf := range set {
			if !hasPath(back, leaf) {
				t.Errorf("%s: %s loads but does not reach the Config", v.name, leaf)
			}
			loaded[leaf] = true
		}
	}
	for _, leaf := range leaves {
		if leaf != "sink.type" && !loaded[leaf] && !failed && !secretFileKey(leaf, documented) {
			t.Errorf("docs/config.md documents %s, but no config loaded it", leaf)
		}
	}

	// The environment variables the docs name set the keys they say.
	envRow := regexp.MustCompile("(?m)^\\| `(SLUICE_[A-Z0-9_]+)` \\| `([a-z0-9_.]+)`")
	for _, m := range envRow.FindAllStringSubmatch(doc, -1) {
		if !accepted[m[2]] || EnvName(m[2]) != m[1] {
			t.Errorf("docs/config.md says %s sets %s; the variable of %s is %s", m[1], m[2], m[2], EnvName(m[2]))
		}
	}
}

// TestDocsDescribeContextColumns checks that docs/config.md describes every context column.
func TestDocsDescribeContextColumns(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range batch.MetadataNames() {
		if !strings.Contains(string(doc), "| `"+name+"` | `__"+name+"` |") {
			t.Errorf("docs/config.md does not describe the context column %s", name)
		}
	}
}

// TestDocsExamplesParse checks that the YAML blocks of docs/config.md are valid: the complete
// example as it stands, and each sink section in place of the complete example's sink.
func TestDocsExamplesParse(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 4 {
		t.Fatalf("docs/config.md has %d YAML blocks, want the complete example and 3 sink sections", len(blocks))
	}
	complete := blocks[0][1]
	c, err := parse(strings.NewReader(complete), "yaml", noEnv)
	if err != nil {
		t.Fatalf("the complete example does not load: %v", err)
	}
	if c.Sink.Iceberg == nil || len(c.Tables) != 2 || len(c.Tables[1].Metadata) != 4 {
		t.Errorf("the complete example lost settings: %s", mustJSON(t, c))
	}
	start := strings.Index(complete, "sink:\n")
	end := strings.Index(complete, "tables:\n")
	for _, b := range blocks[1:4] {
		variant := complete[:start] + b[1] + "\n" + complete[end:]
		variant = strings.ReplaceAll(variant, "target: raw.order_items", "target: order_items")
		variant = strings.ReplaceAll(variant, "target: raw.orders", "target: orders")
		if _, err := parse(strings.NewReader(variant), "yaml", noEnv); err != nil {
			t.Errorf("sink section does not load:\n%s\n%v", b[1], err)
		}
	}
}

// docDefaults reads the defaults docs/config.md's key tables give as one literal value (such as
// `64MiB` or `resync`), by key path; a default that names another key or a pattern is left out.
func docDefaults(t *testing.T, doc string) map[string]any {
	t.Helper()
	documented := map[string]bool{}
	for _, k := range docKeys(t, doc) {
		documented[k.path] = true
	}
	out := map[string]any{}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| [^|]* \\| `([^`<]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		if documented[m[2]] {
			continue // a key's value, such as source.dsn
		}
		var v any
		if err := yaml.Unmarshal([]byte(m[2]), &v); err != nil {
			t.Fatalf("docs/config.md: the default of %s, %q, is not a YAML value: %v", m[1], m[2], err)
		}
		out[m[1]] = v
	}
	if len(out) < 25 {
		t.Fatalf("read %d literal defaults from docs/config.md; did its tables change shape?", len(out))
	}
	return out
}

// downstreamDefaults are the keys whose documented default is what the code downstream makes of
// the key left unset (the loader keeps it empty): there the literal need only load.
var downstreamDefaults = map[string]bool{
	"tables[].on_partition_change": true, // source.TableConfig.OnPartitionChange: empty resyncs
	"tables[].on_recreate":         true, // source.TableConfig.OnRecreate: empty stops (reader.RecreateStop)
	"tables[].on_drop_column":      true, // source.TableConfig.OnDropColumn: empty resyncs
	"tables[].on_rewrite":          true, // source.TableConfig.OnRewrite: empty resyncs
}

// TestDocsDefaultsAreTheLoaders keeps the Default column of docs/config.md and the defaults the
// loader fills in (config.Default*, batch.DefaultMaxRows and the others) one and the same: a
// config that sets a key to its documented default loads to the same Config as one without it.
func TestDocsDefaultsAreTheLoaders(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	samples := docSamples()
	// The smallest valid config of each sink.
	base := func(sink string) map[string]any {
		tree := map[string]any{}
		for _, p := range []string{"pipeline", "source.dsn", "staging.url", "tables[].source"} {
			setPath(tree, p, samples[p])
		}
		setPath(tree, "sink.type", sink)
		setPath(tree, "tables[].target", "orders")
		switch sink {
		case SinkIceberg:
			setPath(tree, "tables[].target", "raw.orders")
			setPath(tree, "sink.iceberg.catalog.type", CatalogREST)
			setPath(tree, "sink.iceberg.catalog.uri", "https://catalog.internal/api")
			setPath(tree, "sink.iceberg.warehouse", samples["sink.iceberg.warehouse"])
		case SinkClickHouse:
			setPath(tree, "sink.clickhouse.addr", samples["sink.clickhouse.addr"])
		case SinkCouchbase:
			for _, k := range []string{"connstr", "username", "password", "bucket"} {
				setPath(tree, "sink.couchbase."+k, samples["sink.couchbase."+k])
			}
		case SinkPlugin:
			setPath(tree, "sink.plugin.address", samples["sink.plugin.address"])
		}
		return tree
	}
	load := func(t *testing.T, tree map[string]any) string {
		t.Helper()
		data, _ := json.Marshal(tree)
		c, err := parse(strings.NewReader(string(data)), "yaml", noEnv)
		if err != nil {
			t.Fatalf("%v\nconfig: %s", err, data)
		}
		return mustJSON(t, c)
	}
	for path, def := range docDefaults(t, string(raw)) {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			sink := SinkIceberg
			if rest, ok := strings.CutPrefix(path, "sink."); ok {
				sink, _, _ = strings.Cut(rest, ".")
			}
			tree := base(sink)
			without := load(t, tree)
			setPath(tree, path, def)
			with := load(t, tree)
			if with != without && !downstreamDefaults[path] {
				t.Errorf("docs/config.md gives %s the default %v, but the loader's default differs:\nwithout the key: %s\nwith %v: %s", path, def, without, def, with)
			}
		})
	}
}
