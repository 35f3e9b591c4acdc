package config

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// baseInput returns a minimal valid config as a generic tree.
func baseInput() map[string]any {
	return map[string]any{
		"pipeline": "demo",
		"source":   map[string]any{"dsn": "postgres://sluice@127.0.0.1:5432/shop"},
		"staging":  map[string]any{"url": "/var/lib/sluice/staging"},
		"sink": map[string]any{
			"type": "iceberg",
			"iceberg": map[string]any{
				"catalog":   map[string]any{"type": "sql", "uri": "/var/lib/sluice/catalog.db"},
				"warehouse": "/var/lib/sluice/warehouse",
			},
		},
		"tables": []any{
			map[string]any{"source": "public.orders", "target": "raw.orders"},
		},
	}
}

// edit changes a generic config tree in place.
type edit func(m map[string]any)

// set returns an edit that sets the value at a dotted path; numeric segments index lists.
// Missing mappings on the way are created.
func set(path string, v any) edit {
	return func(m map[string]any) {
		segs := strings.Split(path, ".")
		var cur any = m
		for i, s := range segs {
			last := i == len(segs)-1
			switch c := cur.(type) {
			case map[string]any:
				if last {
					c[s] = v
					return
				}
				if _, ok := c[s]; !ok {
					c[s] = map[string]any{}
				}
				cur = c[s]
			case []any:
				n, _ := strconv.Atoi(s)
				if last {
					c[n] = v
					return
				}
				cur = c[n]
			}
		}
	}
}

// del returns an edit that removes the key at a dotted path of mappings.
func del(path string) edit {
	return func(m map[string]any) {
		segs := strings.Split(path, ".")
		var cur any = m
		for _, s := range segs[:len(segs)-1] {
			if l, ok := cur.([]any); ok {
				n, _ := strconv.Atoi(s)
				cur = l[n]
				continue
			}
			cur = cur.(map[string]any)[s]
		}
		delete(cur.(map[string]any), segs[len(segs)-1])
	}
}

// sinkOf returns an edit that replaces the sink with one of type typ and section sec.
func sinkOf(typ string, sec map[string]any) edit {
	return set("sink", map[string]any{"type": typ, typ: sec})
}

func clickhouseSink() edit {
	return sinkOf("clickhouse", map[string]any{"addr": "127.0.0.1:9000"})
}

func couchbaseSink() map[string]any {
	return map[string]any{"connstr": "couchbase://127.0.0.1", "username": "u", "password": "p", "bucket": "default"}
}

// want is an expected problem: its exact path and a part of its message.
type want struct{ path, msg string }

// problemCase is an edit of the base config and the problems it must cause.
type problemCase struct {
	name  string
	edits []edit
	want  []want
}

// problemCases has one case per problem message the decoder and the validator produce.
func problemCases() []problemCase {
	return []problemCase{
		// decoding
		{"unknown top-level key", []edit{set("pipline", "x")}, []want{{"pipline", "unknown key; allowed keys here are pipeline, source, temporal"}}},
		{"unknown nested key", []edit{set("sink.iceberg.catalog.urii", "x")}, []want{{"sink.iceberg.catalog.urii", "allowed keys here are type, uri, uri_file, dialect, name"}}},
		{"unknown key in a list entry", []edit{set("tables.0.metadata", []any{map[string]any{"from": "op", "as": "op", "frm": "x"}})}, []want{{"tables[0].metadata[0].frm", "allowed keys here are from, as"}}},
		{"mapping expected", []edit{set("source", "postgres://x")}, []want{{"source", "want a mapping of keys (dsn, dsn_file, slot, publication, snapshot_chunk_rows, snapshot_chunk_bytes, snapshot_parallelism, max_parallel_backfills), got the string"}}},
		{"list expected", []edit{set("tables", map[string]any{"source": "public.orders"})}, []want{{"tables", "want a list, got a mapping"}}},
		{"string expected", []edit{set("pipeline", 12)}, []want{{"pipeline", "want a string, got the number 12"}}},
		{"integer expected", []edit{set("batch.max_rows", "many")}, []want{{"batch.max_rows", `want a whole number, got "many"`}}},
		{"fraction for integer", []edit{set("batch.max_rows", 1.5)}, []want{{"batch.max_rows", "want a whole number, got 1.5"}}},
		{"boolean expected", []edit{clickhouseSink(), set("sink.clickhouse.tls", "maybe")}, []want{{"sink.clickhouse.tls", "want true or false"}}},
		{"clickhouse client certificate without key", []edit{clickhouseSink(), set("sink.clickhouse.tls", map[string]any{"cert_file": "/c.pem"})},
			[]want{{"sink.clickhouse.tls", "cert_file and key_file go together"}}},
		{"clickhouse tls disabled with a ca", []edit{clickhouseSink(), set("sink.clickhouse.tls", map[string]any{"enabled": false, "ca_file": "/ca.pem"})},
			[]want{{"sink.clickhouse.tls.enabled", "is false, but other TLS keys are set"}}},
		{"clickhouse skip verify beside a ca", []edit{clickhouseSink(), set("sink.clickhouse.tls", map[string]any{"insecure_skip_verify": true, "ca_file": "/ca.pem"})},
			[]want{{"sink.clickhouse.tls.insecure_skip_verify", "is not checked against ca_file or server_name"}}},
		{"clickhouse tls unknown key", []edit{clickhouseSink(), set("sink.clickhouse.tls", map[string]any{"ca": "/ca.pem"})},
			[]want{{"sink.clickhouse.tls.ca", "unknown key; allowed keys here are enabled, ca_file, cert_file, key_file, server_name, insecure_skip_verify"}}},
		{"empty list entry", []edit{set("tables", []any{nil})}, []want{{"tables[0]", "empty list entry"}}},
		{"bad size", []edit{set("batch.max_bytes", "64 megs")}, []want{{"batch.max_bytes", `cannot read "64 megs" as a size; write a number of bytes or a number with a unit, such as 64MiB`}}},
		{"size of wrong type", []edit{set("batch.max_bytes", true)}, []want{{"batch.max_bytes", "want a size"}}},
		{"duration without unit", []edit{set("batch.max_wait", 5)}, []want{{"batch.max_wait", "want a duration; write a number with a unit, such as 500ms"}}},
		{"bad duration", []edit{set("batch.max_wait", "5 parsecs")}, []want{{"batch.max_wait", `cannot read "5 parsecs" as a duration`}}},

		// keys viper would change
		{"upper-case key", []edit{del("pipeline"), set("Pipeline", "demo")}, []want{{"Pipeline", "keys are lower case; write pipeline"}}},
		{"upper-case nested key", []edit{del("sink.iceberg.warehouse"), set("sink.iceberg.WareHouse", "/wh")}, []want{{"sink.iceberg.WareHouse", "keys are lower case; write warehouse"}}},
		{"dotted key", []edit{del("sink.type"), set("sink.iceberg.catalog.x", 1), func(m map[string]any) { m["sink.type"] = "iceberg" }}, []want{{"sink.type", "a key cannot contain a dot; nest the keys instead"}, {"sink.iceberg.catalog.x", "unknown key"}}},

		// pipeline
		{"pipeline missing", []edit{del("pipeline")}, []want{{"pipeline", "missing; name the pipeline"}}},
		{"pipeline characters", []edit{set("pipeline", "Orders Lake")}, []want{{"pipeline", `"Orders Lake" is not allowed; use lower-case letters, digits, _ and -`}}},
		{"pipeline too long", []edit{set("pipeline", strings.Repeat("p", 57))}, []want{{"pipeline", "use at most 56"}}},

		// source
		{"dsn missing", []edit{del("source.dsn")}, []want{{"source.dsn", "missing; set a postgres:// URL or key=value connection string, preferably with SLUICE_SOURCE_DSN"}}},
		{"dsn not a connection string", []edit{set("source.dsn", "localhost")}, []want{{"source.dsn", "not a connection string"}}},
		{"dsn other scheme", []edit{set("source.dsn", "mysql://u@h/db")}, []want{{"source.dsn", "unknown URL scheme"}}},
		{"dsn bad URL", []edit{set("source.dsn", "postgres://u:p%zz@h/db")}, []want{{"source.dsn", "not a valid postgres:// URL"}}},
		{"slot name", []edit{set("source.slot", "Sluice-Slot")}, []want{{"source.slot", `"Sluice-Slot" is not a valid slot name`}}},
		{"publication name", []edit{set("source.publication", "1pub")}, []want{{"source.publication", `"1pub" is not allowed`}}},
		{"chunk rows explicit zero", []edit{set("source.snapshot_chunk_rows", 0)}, []want{{"source.snapshot_chunk_rows", "must not be 0; remove the key to use the default 50000"}}},
		{"chunk rows negative", []edit{set("source.snapshot_chunk_rows", -1)}, []want{{"source.snapshot_chunk_rows", "is -1; it must be at least 1"}}},
		{"parallel backfills explicit zero", []edit{set("source.max_parallel_backfills", 0)}, []want{{"source.max_parallel_backfills", "is 0; it must be at least 1, or remove the key"}}},
		{"parallel backfills negative", []edit{set("source.max_parallel_backfills", -2)}, []want{{"source.max_parallel_backfills", "is -2; it must be at least 1"}}},
		{"parallel backfills too many", []edit{set("source.max_parallel_backfills", 5000)}, []want{{"source.max_parallel_backfills", "is 5000; use at most 1000: each backfill holds a replication slot"}}},
		{"chunk rows too many", []edit{set("source.snapshot_chunk_rows", 20_000_000)}, []want{{"source.snapshot_chunk_rows", "is 20000000; use at most 10000000: a chunk is read whole into the worker's memory"}}},

		// temporal
		{"temporal address", []edit{set("temporal.address", "localhost")}, []want{{"temporal.address", `"localhost" is not host:port`}}},
		{"temporal port", []edit{set("temporal.address", "localhost:http")}, []want{{"temporal.address", "is not host:port"}}},
		{"namespace space", []edit{set("temporal.namespace", "my ns")}, []want{{"temporal.namespace", "contains white space"}}},
		{"task queue space", []edit{set("temporal.task_queue", "q 1")}, []want{{"temporal.task_queue", "contains white space"}}},

		// staging
		{"staging missing", []edit{del("staging.url")}, []want{{"staging.url", "missing; set a directory, file:///dir or s3://bucket/prefix"}}},
		{"staging scheme", []edit{set("staging.url", "gs://bucket/x")}, []want{{"staging.url", `scheme "gs" is not supported`}}},
		{"staging s3 bucket", []edit{set("staging.url", "s3:///prefix")}, []want{{"staging.url", "has no bucket"}}},
		{"staging file dir", []edit{set("staging.url", "file://")}, []want{{"staging.url", "has no directory"}}},
		{"staging bad URL", []edit{set("staging.url", "s3://b/%zz")}, []want{{"staging.url", "is not a valid URL"}}},
		{"staging s3 parameters", []edit{set("staging.url", "s3://b/x?endpoint=http://h:9000&region=r&path_style=false")}, nil},
		{"staging misspelt parameter", []edit{set("staging.url", "s3://b/x?regoin=eu-west-1")}, []want{{"staging.url", `unknown query parameter "regoin"; the parameters are endpoint, region, path_style`}}},
		{"staging gocloud parameter", []edit{set("staging.url", "s3://b/x?use_path_style=true")}, []want{{"staging.url", `unknown query parameter "use_path_style"`}}},
		{"staging path style", []edit{set("staging.url", "s3://b/x?path_style=maybe")}, []want{{"staging.url", `path_style="maybe": want true or false`}}},

		// batch
		{"max rows zero", []edit{set("batch.max_rows", 0)}, []want{{"batch.max_rows", "must not be 0; remove the key to use the default 100000"}}},
		{"max rows negative", []edit{set("batch.max_rows", -5)}, []want{{"batch.max_rows", "is -5; it must be at least 1"}}},
		{"max bytes zero", []edit{set("batch.max_bytes", 0)}, []want{{"batch.max_bytes", "must not be 0; remove the key to use the default 64MiB"}}},
		{"max bytes tiny", []edit{set("batch.max_bytes", 64)}, []want{{"batch.max_bytes", "is 64 bytes; it must be at least 1KiB (a bare number counts bytes: write 64MiB"}}},
		{"max bytes huge", []edit{set("batch.max_bytes", "100TiB")}, []want{{"batch.max_bytes", "is 100TiB; use at most 1GiB: a batch's text column is one Arrow string array, which holds at most 2GiB"}}},
		{"max bytes at the bound", []edit{set("batch.max_bytes", "1GiB")}, nil},
		{"max rows too many", []edit{set("batch.max_rows", 50_000_000)}, []want{{"batch.max_rows", "is 50000000; use at most 10000000: each buffered row costs about 128 bytes"}}},
		{"max wait zero", []edit{set("batch.max_wait", "0s")}, []want{{"batch.max_wait", "must not be 0; remove the key to use the default 1s"}}},
		{"max wait negative", []edit{set("batch.max_wait", "-1s")}, []want{{"batch.max_wait", "is -1s; it must be positive"}}},

		// sink
		{"sink type missing", []edit{del("sink.type")}, []want{{"sink.type", "missing; set one of iceberg, clickhouse, couchbase or plugin"}, {"sink.iceberg", `set, but sink.type is ""`}}},
		{"sink type unknown", []edit{set("sink.type", "kafka")}, []want{{"sink.type", `"kafka" is not a sink type; use one of iceberg, clickhouse, couchbase or plugin`}, {"sink.iceberg", `set, but sink.type is "kafka"; set sink.type to iceberg or remove this section`}}},
		{"sink section missing", []edit{set("sink", map[string]any{"type": "clickhouse"})}, []want{{"sink.clickhouse", "missing; sink.type is clickhouse, so set the clickhouse section"}}},
		{"other sink section", []edit{set("sink.clickhouse", map[string]any{"addr": "h:9000"})}, []want{{"sink.clickhouse", "not allowed with sink.type iceberg; remove this section (and any SLUICE_SINK_CLICKHOUSE_* variable)"}}},

		// iceberg
		{"catalog type missing", []edit{del("sink.iceberg.catalog.type")}, []want{{"sink.iceberg.catalog.type", "missing; use sql"}}},
		{"catalog type unknown", []edit{set("sink.iceberg.catalog.type", "glue")}, []want{{"sink.iceberg.catalog.type", `"glue" is not a catalog type; use sql or rest`}}},
		{"catalog dialect", []edit{set("sink.iceberg.catalog.dialect", "mysql")}, []want{{"sink.iceberg.catalog.dialect", `"mysql" is not supported; use sqlite or postgres`}}},
		{"sql catalog uri missing", []edit{del("sink.iceberg.catalog.uri")}, []want{{"sink.iceberg.catalog.uri", "missing; set the catalog database"}}},
		{"rest catalog uri", []edit{set("sink.iceberg.catalog", map[string]any{"type": "rest", "uri": "127.0.0.1:8181"})}, []want{{"sink.iceberg.catalog.uri", "not an http(s) URL"}}},
		{"rest catalog uri missing", []edit{set("sink.iceberg.catalog", map[string]any{"type": "rest"})}, []want{{"sink.iceberg.catalog.uri", "missing; set the REST catalog's URL"}}},
		{"rest catalog dialect", []edit{set("sink.iceberg.catalog", map[string]any{"type": "rest", "uri": "http://h:8181", "dialect": "sqlite"})}, []want{{"sink.iceberg.catalog.dialect", "applies only to catalog type sql; remove it"}}},
		{"catalog name", []edit{set("sink.iceberg.catalog.name", "my catalog")}, []want{{"sink.iceberg.catalog.name", `"my catalog" is not allowed`}}},
		{"warehouse missing", []edit{del("sink.iceberg.warehouse")}, []want{{"sink.iceberg.warehouse", "missing; set a directory, file:///dir or s3://bucket/prefix"}}},
		{"warehouse scheme", []edit{set("sink.iceberg.warehouse", "hdfs://nn/wh")}, []want{{"sink.iceberg.warehouse", `scheme "hdfs" is not supported`}}},
		{"s3 without s3 warehouse", []edit{set("sink.iceberg.s3", map[string]any{"region": "us-east-1"})}, []want{{"sink.iceberg.s3", "applies only to an s3:// warehouse"}}},
		{"s3 endpoint", []edit{set("sink.iceberg.warehouse", "s3://wh/x"), set("sink.iceberg.s3", map[string]any{"region": "r", "endpoint": "127.0.0.1:9000"})}, []want{{"sink.iceberg.s3.endpoint", `"127.0.0.1:9000" is not an http(s) URL`}}},
		{"s3 half credentials", []edit{set("sink.iceberg.warehouse", "s3://wh/x"), set("sink.iceberg.s3", map[string]any{"region": "r", "access_key_id": "AK"})}, []want{{"sink.iceberg.s3", "set both access_key_id and secret_access_key (the secret preferably with SLUICE_SINK_ICEBERG_S3_SECRET_ACCESS_KEY)"}}},
		{"compaction zero", []edit{set("sink.iceberg.maintenance.compact_every_commits", 0)}, []want{{"sink.iceberg.maintenance.compact_every_commits", "must not be 0; write -1 to turn compaction off"}}},
		{"compaction negative", []edit{set("sink.iceberg.maintenance.compact_every_commits", -2)}, []want{{"sink.iceberg.maintenance.compact_every_commits", "is -2; use a number of commits of at least 1, or -1"}}},
		{"expiry zero", []edit{set("sink.iceberg.maintenance.expire_snapshots_after", "0h")}, []want{{"sink.iceberg.maintenance.expire_snapshots_after", "must not be 0"}}},
		{"compaction too rare", []edit{set("sink.iceberg.maintenance.compact_every_commits", 20000)}, []want{{"sink.iceberg.maintenance.compact_every_commits", "is 20000; use at most 10000: every commit rewrites the table metadata"}}},
		{"compression level", []edit{set("sink.iceberg.compression_level", 23)}, []want{{"sink.iceberg.compression_level", "is 23; use a zstd level from 1 (fastest, the default) to 22"}}},
		{"compression level zero", []edit{set("sink.iceberg.compression_level", 0)}, []want{{"sink.iceberg.compression_level", "must not be 0; remove the key to use the default 1"}}},
		{"partition buckets negative", []edit{set("sink.iceberg.partition_buckets", -4)}, []want{{"sink.iceberg.partition_buckets", "is -4; use 0 for unpartitioned tables"}}},
		{"partition buckets zero", []edit{set("sink.iceberg.partition_buckets", 0)}, nil},
		{"partition buckets too many", []edit{set("sink.iceberg.partition_buckets", 4096)}, []want{{"sink.iceberg.partition_buckets", "is 4096; use at most 1024: every commit writes up to a data file"}}},
		{"target file size small", []edit{set("sink.iceberg.target_file_size_bytes", "64KiB")}, []want{{"sink.iceberg.target_file_size_bytes", "is 64KiB; use at least 1MiB"}}},
		{"target file size large", []edit{set("sink.iceberg.target_file_size_bytes", "8GiB")}, []want{{"sink.iceberg.target_file_size_bytes", "is 8GiB; use at most 2GiB: compaction rewrites a file on every run"}}},
		{"credential with sql catalog", []edit{set("sink.iceberg.catalog.credential", "id:secret")}, []want{{"sink.iceberg.catalog.credential", "applies only to catalog type rest; remove it (and any SLUICE_SINK_ICEBERG_CATALOG_CREDENTIAL variable)"}}},
		{"token with sql catalog", []edit{set("sink.iceberg.catalog.token", "t0k")}, []want{{"sink.iceberg.catalog.token", "applies only to catalog type rest"}}},
		{"rest credential", []edit{set("sink.iceberg.catalog", map[string]any{"type": "rest", "uri": "http://h:8181", "credential": "nocolon"})}, []want{{"sink.iceberg.catalog.credential", "not client_id:client_secret"}}},
		{"rest credential and token", []edit{set("sink.iceberg.catalog", map[string]any{"type": "rest", "uri": "http://h:8181", "credential": "id:secret", "token": "t0k"})}, nil},
		{"expiry negative", []edit{set("sink.iceberg.maintenance.expire_snapshots_after", "-1h")}, []want{{"sink.iceberg.maintenance.expire_snapshots_after", "is -1h0m0s; it must be positive"}}},

		// clickhouse
		{"clickhouse addr missing", []edit{sinkOf("clickhouse", map[string]any{"database": "raw"})}, []want{{"sink.clickhouse.addr", "missing; set host:port"}}},
		{"clickhouse addr", []edit{sinkOf("clickhouse", map[string]any{"addr": "h"})}, []want{{"sink.clickhouse.addr", `"h" is not host:port`}}},
		{"clickhouse database", []edit{clickhouseSink(), set("sink.clickhouse.database", "raw-data")}, []want{{"sink.clickhouse.database", `"raw-data" is not allowed`}}},
		{"clickhouse schema", []edit{clickhouseSink(), set("sink.clickhouse.schema", "new")}, []want{{"sink.clickhouse.schema", `"new" is not a table layout; use auto, modern`}}},
		{"clickhouse read timeout", []edit{clickhouseSink(), set("sink.clickhouse.read_timeout", "-1s")}, []want{{"sink.clickhouse.read_timeout", "is -1s; it must be positive"}}},
		{"clickhouse pool", []edit{clickhouseSink(), set("sink.clickhouse.max_open_conns", -2)}, []want{{"sink.clickhouse.max_open_conns", "is -2; use a positive number"}}},
		{"clickhouse pool too large", []edit{clickhouseSink(), set("sink.clickhouse.max_open_conns", 5000)}, []want{{"sink.clickhouse.max_open_conns", "is 5000; use at most 1000: a worker runs at most 1000 activities at once"}}},
		{"clickhouse dial timeout zero", []edit{clickhouseSink(), set("sink.clickhouse.dial_timeout", "0s")}, []want{{"sink.clickhouse.dial_timeout", "must not be 0; remove the key to use the default 10s"}}},

		// couchbase
		{"couchbase connstr missing", []edit{sinkOf("couchbase", couchbaseSink()), del("sink.couchbase.connstr")}, []want{{"sink.couchbase.connstr", "missing; set couchbase://host"}}},
		{"couchbase connstr", []edit{sinkOf("couchbase", couchbaseSink()), set("sink.couchbase.connstr", "http://h")}, []want{{"sink.couchbase.connstr", "not a Couchbase connection string"}}},
		{"couchbase username", []edit{sinkOf("couchbase", couchbaseSink()), del("sink.couchbase.username")}, []want{{"sink.couchbase.username", "missing; set the user"}}},
		{"couchbase password", []edit{sinkOf("couchbase", couchbaseSink()), del("sink.couchbase.password")}, []want{{"sink.couchbase.password", "missing; set it with SLUICE_SINK_COUCHBASE_PASSWORD"}}},
		{"couchbase bucket missing", []edit{sinkOf("couchbase", couchbaseSink()), del("sink.couchbase.bucket")}, []want{{"sink.couchbase.bucket", "missing; set the bucket"}}},
		{"couchbase bucket", []edit{sinkOf("couchbase", couchbaseSink()), set("sink.couchbase.bucket", "my bucket")}, []want{{"sink.couchbase.bucket", `"my bucket" is not a bucket name`}}},
		{"couchbase durability", []edit{sinkOf("couchbase", couchbaseSink()), set("sink.couchbase.durability", "strong")}, []want{{"sink.couchbase.durability", `"strong" is not a durability level; use none, majority`}}},
		{"couchbase concurrency", []edit{sinkOf("couchbase", couchbaseSink()), set("sink.couchbase.concurrency", 5000)}, []want{{"sink.couchbase.concurrency", "is 5000; use at most 1024: gocb queues at most 2048 operations per node"}}},
		{"couchbase concurrency zero", []edit{sinkOf("couchbase", couchbaseSink()), set("sink.couchbase.concurrency", 0)}, []want{{"sink.couchbase.concurrency", "must not be 0; remove the key to use the default 32"}}},
		{"couchbase concurrency negative", []edit{sinkOf("couchbase", couchbaseSink()), set("sink.couchbase.concurrency", -1)}, []want{{"sink.couchbase.concurrency", "is -1; use a positive number"}}},
		{"couchbase reserved scope", []edit{sinkOf("couchbase", couchbaseSink()), set("sink.couchbase.scope", "_system")}, []want{{"sink.couchbase.scope", "only _default may start with _ or %"}}},
		{"couchbase timeout", []edit{sinkOf("couchbase", couchbaseSink()), set("sink.couchbase.timeout", "-3s")}, []want{{"sink.couchbase.timeout", "is -3s; it must be positive"}}},
		{"couchbase metadata collection", []edit{sinkOf("couchbase", couchbaseSink()), set("sink.couchbase.metadata_collection", "a.b")}, []want{{"sink.couchbase.metadata_collection", `"a.b" is not a collection name`}}},
		{"couchbase scope", []edit{sinkOf("couchbase", couchbaseSink()), set("sink.couchbase.scope", "a.b")}, []want{{"sink.couchbase.scope", `"a.b" is not a scope name`}}},

		// plugin
		{"plugin address", []edit{sinkOf("plugin", map[string]any{"address": ""})}, []want{{"sink.plugin.address", "missing; set host:port"}}},
		{"plugin token without tls", []edit{sinkOf("plugin", map[string]any{"address": "h:1", "token": "t"})}, []want{{"sink.plugin.token", "no TLS, so the token would travel in clear text"}}},
		{"plugin position store schema", []edit{sinkOf("plugin", map[string]any{"address": "h:1", "position_store": map[string]any{"schema": "a-b"}})}, []want{{"sink.plugin.position_store.schema", `"a-b" is not allowed`}}},
		{"plugin position store dsn", []edit{sinkOf("plugin", map[string]any{"address": "h:1", "position_store": map[string]any{"dsn": "mysql://x"}})}, []want{{"sink.plugin.position_store.dsn", "unknown URL scheme"}}},
		{"plugin client cert without key", []edit{sinkOf("plugin", map[string]any{"address": "h:1", "tls": map[string]any{"cert_file": "/c.pem"}})}, []want{{"sink.plugin.tls", "cert_file and key_file go together"}}},

		// tables
		{"no tables", []edit{set("tables", []any{})}, []want{{"tables", "no tables; list at least one"}}},
		{"iceberg layout", []edit{set("tables.0.iceberg", map[string]any{
			"partition_by": []any{"day(created_at)", "bucket(16, id)", "truncate[4](name)", "region", `hours("Created At")`},
			"sort_by":      []any{"created_at desc", "id asc nulls first", "day(created_at)"},
			"properties":   []any{map[string]any{"key": "write.metadata.previous-versions-max", "value": "10"}}})}, nil},
		{"iceberg flow list split at a comma", []edit{set("tables.0.iceberg.partition_by", []any{"day(created_at)", "bucket(16", "id)"})}, nil},
		{"iceberg unknown transform", []edit{set("tables.0.iceberg.partition_by", []any{"week(created_at)"})}, []want{{"tables[0].iceberg.partition_by[0]", `unknown transform "week"; write a column name, bucket(N, col)`}}},
		{"iceberg bucket without N", []edit{set("tables.0.iceberg.partition_by", []any{"bucket(id)"})}, []want{{"tables[0].iceberg.partition_by[0]", "bucket needs a number of buckets N; write bucket(N, col)"}}},
		{"iceberg bucket zero", []edit{set("tables.0.iceberg.partition_by", []any{"bucket(0, id)"})}, []want{{"tables[0].iceberg.partition_by[0]", `bucket needs a number of buckets N of at least 1, not "0"`}}},
		{"iceberg truncate width", []edit{set("tables.0.iceberg.partition_by", []any{"truncate(x, name)"})}, []want{{"tables[0].iceberg.partition_by[0]", `truncate needs a width W of at least 1, not "x"`}}},
		{"iceberg day parameter", []edit{set("tables.0.iceberg.partition_by", []any{"day[2](created_at)"})}, []want{{"tables[0].iceberg.partition_by[0]", "day takes no parameter"}}},
		{"iceberg repeated field", []edit{set("tables.0.iceberg.partition_by", []any{"day(ts)", "days(ts)"})}, []want{{"tables[0].iceberg.partition_by[1]", "repeats tables[0].iceberg.partition_by[0]"}}},
		{"iceberg column not replicated", []edit{set("tables.0.columns", []any{"id", "name"}), set("tables.0.iceberg.partition_by", []any{"day(created_at)"})}, []want{{"tables[0].iceberg.partition_by[0]", "column created_at is not in the table's columns list"}}},
		{"iceberg sort nulls", []edit{set("tables.0.iceberg.sort_by", []any{"id nulls middle"})}, []want{{"tables[0].iceberg.sort_by[0]", "write nulls first or nulls last"}}},
		{"iceberg reserved property", []edit{set("tables.0.iceberg.properties", []any{map[string]any{"key": "format-version", "value": "3"}})}, []want{{"tables[0].iceberg.properties[0].key", "format-version cannot be set: the sink creates format version 2 tables"}}},
		{"iceberg property repeated", []edit{set("tables.0.iceberg.properties", []any{map[string]any{"key": "a.b", "value": "1"}, map[string]any{"key": "a.b", "value": "2"}})}, []want{{"tables[0].iceberg.properties[1].key", "a.b is already set by tables[0].iceberg.properties[0]"}}},
		{"iceberg layout with clickhouse", []edit{clickhouseSink(), set("tables.0.iceberg.partition_by", []any{"id"})}, []want{{"tables[0].iceberg", "applies only to sink.type iceberg"}}},
		{"orphan age too small", []edit{set("sink.iceberg.maintenance.remove_orphans_after", "1m")}, []want{{"sink.iceberg.maintenance.remove_orphans_after", "is 1m0s; use at least 10m0s"}}},
		{"source missing", []edit{del("tables.0.source")}, []want{{"tables[0].source", "missing; set the schema-qualified Postgres table"}}},
		{"source not qualified", []edit{set("tables.0.source", "orders")}, []want{{"tables[0].source", `"orders" is not schema-qualified; write schema.table, such as public.orders`}}},
		{"source three parts", []edit{set("tables.0.source", "db.public.orders")}, []want{{"tables[0].source", `"db.public.orders" has 3 parts`}}},
		{"partition reaction unknown", []edit{set("tables.0.on_partition_change", "ignore")}, []want{{"tables[0].on_partition_change", `"ignore" is not a reaction; use one of resync, stop`}}},
		{"recreate reaction unknown", []edit{set("tables.0.on_recreate", "ignore")}, []want{{"tables[0].on_recreate", `"ignore" is not a reaction; use one of stop, resync`}}},
		{"drop column reaction unknown", []edit{set("tables.0.on_drop_column", "follow")}, []want{{"tables[0].on_drop_column", `"follow" is not a reaction; use one of resync, keep`}}},
		{"rewrite reaction unknown", []edit{set("tables.0.on_rewrite", "follow")}, []want{{"tables[0].on_rewrite", `"follow" is not a reaction; use one of resync, stop`}}},
		{"source syntax", []edit{set("tables.0.source", "public.order items")}, []want{{"tables[0].source", `"public.order items" is not a valid table name: unexpected ' ' at byte 12; quote names`}}},
		{"source unterminated quote", []edit{set("tables.0.source", `public."orders`)}, []want{{"tables[0].source", "unterminated quoted name"}}},
		{"source empty part", []edit{set("tables.0.source", "public.")}, []want{{"tables[0].source", "empty name"}}},
		{"source too long", []edit{set("tables.0.source", "public."+strings.Repeat("o", 64))}, []want{{"tables[0].source", "longer than Postgres' 63 bytes"}}},
		{"duplicate source", []edit{set("tables", []any{
			map[string]any{"source": "public.orders", "target": "raw.a"},
			map[string]any{"source": "Public.ORDERS", "target": "raw.b"},
		})}, []want{{"tables[1].source", "Public.ORDERS is already listed as tables[0]; list each source table once"}}},
		{"quoted source is distinct", []edit{set("tables", []any{
			map[string]any{"source": "public.orders", "target": "raw.a"},
			map[string]any{"source": `public."Orders"`, "target": "raw.b"},
		})}, nil},
		{"target missing", []edit{del("tables.0.target")}, []want{{"tables[0].target", "missing; set the destination table"}}},
		{"iceberg target without namespace", []edit{set("tables.0.target", "orders")}, []want{{"tables[0].target", `"orders" is not a valid target; write namespace.table`}}},
		{"clickhouse target three parts", []edit{clickhouseSink(), set("tables.0.target", "a.b.c")}, []want{{"tables[0].target", "write table or database.table"}}},
		{"couchbase target", []edit{sinkOf("couchbase", couchbaseSink()), set("tables.0.target", "inventory.orders!")}, []want{{"tables[0].target", "write collection or scope.collection"}}},
		{"plugin target", []edit{sinkOf("plugin", map[string]any{"address": "h:1"}), set("tables.0.target", "a..b")}, []want{{"tables[0].target", "write dotted names"}}},
		{"duplicate target", []edit{clickhouseSink(), set("tables", []any{
			map[string]any{"source": "public.a", "target": "orders"},
			map[string]any{"source": "public.b", "target": "default.orders"},
		})}, []want{{"tables[1].target", "default.orders is already the target of tables[0]"}}},
		{"metadata from unknown", []edit{set("tables.0.metadata", []any{map[string]any{"from": "commit_time", "as": "committed_at"}})}, []want{{"tables[0].metadata[0].from", `"commit_time" is not a context column; use one of op, pos, commit_ts, ingest_ts, snapshot, phase`}}},
		{"metadata from missing", []edit{set("tables.0.metadata", []any{map[string]any{"as": "committed_at"}})}, []want{{"tables[0].metadata[0].from", "missing; use one of op, pos"}}},
		{"metadata as missing", []edit{set("tables.0.metadata", []any{map[string]any{"from": "op"}})}, []want{{"tables[0].metadata[0].as", "missing; name the destination column"}}},
		{"metadata as invalid", []edit{set("tables.0.metadata", []any{map[string]any{"from": "op", "as": "1op"}})}, []want{{"tables[0].metadata[0].as", `"1op" is not allowed`}}},
		{"metadata as reserved", []edit{set("tables.0.metadata", []any{map[string]any{"from": "op", "as": "__op"}})}, []want{{"tables[0].metadata[0].as", "reserved for Sluice's context columns"}}},
		{"metadata duplicate as", []edit{set("tables.0.metadata", []any{
			map[string]any{"from": "commit_ts", "as": "ts"},
			map[string]any{"from": "ingest_ts", "as": "TS"},
		})}, []want{{"tables[0].metadata[1].as", `"TS" is already used by tables[0].metadata[0]`}}},
		{"key empty", []edit{set("tables.0.key", []any{})}, []want{{"tables[0].key", "empty; list the key columns, such as [id], or remove key to use the primary key"}}},
		{"key column invalid", []edit{set("tables.0.key", []any{"id", "a.b"})}, []want{{"tables[0].key[1]", `"a.b" is not a column name`}}},
		{"key column duplicate", []edit{set("tables.0.key", []any{"id", "ID"})}, []want{{"tables[0].key[1]", `"ID" is already listed as tables[0].key[0]`}}},
		{"columns and exclude_columns", []edit{set("tables.0.columns", []any{"id"}), set("tables.0.exclude_columns", []any{"secret"})}, []want{{"tables[0].exclude_columns", "set together with columns"}}},
		{"columns empty", []edit{set("tables.0.columns", []any{})}, []want{{"tables[0].columns", "empty; list column names"}}},
		{"exclude_columns duplicate", []edit{set("tables.0.exclude_columns", []any{"a", "A"})}, []want{{"tables[0].exclude_columns[1]", `"A" is already listed as tables[0].exclude_columns[0]`}}},
		{"columns invalid", []edit{set("tables.0.columns", []any{"a.b"})}, []want{{"tables[0].columns[0]", `"a.b" is not a column name`}}},
		{"where with a semicolon", []edit{set("tables.0.where", "id > 1; DROP TABLE x")}, []want{{"tables[0].where", "contains ';'"}}},
	}
}

// problemsOf returns the problems of err, failing the test when err is not an *Error.
func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error is not a *config.Error: %v", err)
	}
	return ce.Problems
}

// checkProblems asserts that got holds exactly the wanted problems.
func checkProblems(t *testing.T, got []Problem, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d problems, want %d:\n%v", len(got), len(wants), &Error{Problems: got})
	}
	for _, w := range wants {
		found := false
		for _, p := range got {
			found = found || (p.Path == w.path && strings.Contains(p.Msg, w.msg))
		}
		if !found {
			t.Errorf("no problem at %s containing %q; got:\n%v", w.path, w.msg, &Error{Problems: got})
		}
	}
}

func TestProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range problemCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := baseInput()
			for _, e := range tc.edits {
				e(in)
			}
			data, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			// JSON is YAML, so one input exercises both paths: viper's YAML reader and FromJSON.
			_, err = parse(strings.NewReader(string(data)), "yaml", noEnv)
			checkProblems(t, problemsOf(t, err), tc.want)
			if tc.name == "dotted key" {
				return // only viper reads dotted keys as nested ones
			}
			_, err = FromJSON(data)
			checkProblems(t, problemsOf(t, err), tc.want)
		})
	}
}

// noEnv is an empty environment.
func noEnv(string) (string, bool) { return "", false }

func TestEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	in := baseInput()
	var wants []want
	for _, tc := range []string{"unknown nested key", "pipeline characters", "bad size", "metadata duplicate as", "warehouse missing", "dsn missing"} {
		for _, c := range problemCases() {
			if c.name == tc {
				for _, e := range c.edits {
					e(in)
				}
				wants = append(wants, c.want...)
			}
		}
	}
	data, _ := json.Marshal(in)
	_, err := FromJSON(data)
	got := problemsOf(t, err)
	checkProblems(t, got, wants)
	// Problems read in file order: pipeline, source, ..., sink, tables.
	for i := 1; i < len(got); i++ {
		if pathLess(got[i].Path, got[i-1].Path) {
			t.Errorf("problem %s listed after %s", got[i].Path, got[i-1].Path)
		}
	}
	if !strings.HasPrefix(err.Error(), "invalid config: 6 problems:\n  - pipeline: ") {
		t.Errorf("message starts %q", err.Error()[:60])
	}
}
