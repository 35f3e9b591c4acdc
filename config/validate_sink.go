package config

import (
	"net/url"
	"strings"

	"github.com/sluicecdc/sluice/batch"
)

// sinkSections lists, per sink type, whether its section is set.
func sinkSections(s *Sink) []struct {
	typ string
	set bool
} {
	return []struct {
		typ string
		set bool
	}{
		{SinkIceberg, s.Iceberg != nil},
		{SinkClickHouse, s.ClickHouse != nil},
		{SinkCouchbase, s.Couchbase != nil},
		{SinkPlugin, s.Plugin != nil},
	}
}

const sinkTypes = "iceberg, clickhouse, couchbase or plugin"

func (v *validator) sink(s *Sink) {
	known := false
	for _, sec := range sinkSections(s) {
		known = known || sec.typ == s.Type
	}
	switch {
	case s.Type == "":
		v.ps.add("sink.type", "missing; set one of %s, and its section", sinkTypes)
	case !known:
		v.ps.add("sink.type", "%q is not a sink type; use one of %s", s.Type, sinkTypes)
	}
	for _, sec := range sinkSections(s) {
		path := "sink." + sec.typ
		switch {
		case sec.typ == s.Type && !sec.set:
			v.ps.add(path, "missing; sink.type is %s, so set the %s section", s.Type, s.Type)
		case sec.typ != s.Type && sec.set && known:
			v.ps.add(path, "not allowed with sink.type %s; remove this section (and any %s* variable)", s.Type, EnvName(path)+"_")
		case sec.typ != s.Type && sec.set:
			v.ps.add(path, "set, but sink.type is %q; set sink.type to %s or remove this section", s.Type, sec.typ)
		}
	}
	switch {
	case s.Type == SinkIceberg && s.Iceberg != nil:
		v.iceberg(s.Iceberg)
	case s.Type == SinkClickHouse && s.ClickHouse != nil:
		v.clickhouse(s.ClickHouse)
	case s.Type == SinkCouchbase && s.Couchbase != nil:
		v.couchbase(s.Couchbase)
	case s.Type == SinkPlugin && s.Plugin != nil:
		v.plugin(s.Plugin)
	}
}

func (v *validator) plugin(pl *Plugin) {
	const p = "sink.plugin."
	v.hostPort(p+"address", pl.Address)
	if pl.Token != "" && !pl.TLS.On() {
		v.ps.add(p+"token", "set, but the connection has no TLS, so the token would travel in clear text; set sink.plugin.tls (ca_file, or enabled: true)")
	}
	v.tls(p+"tls", pl.TLS, pl.TLS.On(), "other TLS keys are set")
	if dsn := pl.PositionStore.DSN; dsn != "" {
		if err := checkDSN(dsn); err != nil {
			v.ps.add(p+"position_store.dsn", "%v", err)
		}
	}
	if sc := pl.PositionStore.Schema; !batch.PlainName(sc) || len(sc) > batch.MaxNameLen {
		v.ps.add(p+"position_store.schema", "%q is not allowed; use letters, digits and _ (not starting with a digit), at most 63 characters", sc)
	}
}

func (v *validator) iceberg(ice *Iceberg) {
	const p = "sink.iceberg."
	cat := &ice.Catalog
	switch cat.Type {
	case "":
		v.ps.add(p+"catalog.type", "missing; use sql (a sqlite or Postgres database) or rest")
	case CatalogSQL:
		if cat.Dialect != DialectSQLite && cat.Dialect != DialectPostgres {
			v.ps.add(p+"catalog.dialect", "%q is not supported; use sqlite or postgres", cat.Dialect)
		}
		v.required(p+"catalog.uri", cat.URI, "set the catalog database: a sqlite file path, or a Postgres DSN with dialect postgres")
	case CatalogREST:
		if cat.Dialect != "" {
			v.ps.add(p+"catalog.dialect", "applies only to catalog type sql; remove it")
		}
		if cat.Credential != "" && !strings.Contains(cat.Credential, ":") {
			v.ps.add(p+"catalog.credential", "not client_id:client_secret; write the OAuth2 client's id and secret joined by a colon")
		}
		if v.required(p+"catalog.uri", cat.URI, "set the REST catalog's URL, such as http://127.0.0.1:8181") {
			if u, err := url.Parse(cat.URI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.ps.add(p+"catalog.uri", "not an http(s) URL; write the REST catalog's URL, such as http://127.0.0.1:8181")
			}
		}
	default:
		v.ps.add(p+"catalog.type", "%q is not a catalog type; use sql or rest", cat.Type)
	}
	if cat.Type != CatalogREST {
		for _, kv := range [][2]string{{"credential", cat.Credential}, {"token", cat.Token}} {
			if kv[1] != "" {
				v.ps.add(p+"catalog."+kv[0], "applies only to catalog type rest; remove it (and any %s variable)", EnvName(p+"catalog."+kv[0]))
			}
		}
	}
	if !catalogNameRe.MatchString(cat.Name) {
		v.ps.add(p+"catalog.name", "%q is not allowed; use letters, digits, _ and -", cat.Name)
	}
	s3Warehouse := strings.HasPrefix(ice.Warehouse, "s3://")
	if v.required(p+"warehouse", ice.Warehouse, "set a directory, file:///dir or s3://bucket/prefix for data files") {
		v.location(p+"warehouse", ice.Warehouse)
	}
	if s3 := ice.S3; s3 != nil {
		if !s3Warehouse {
			v.ps.add(p+"s3", "applies only to an s3:// warehouse; remove it or set warehouse to s3://bucket/prefix")
		}
		if s3.Endpoint != "" {
			if u, err := url.Parse(s3.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.ps.add(p+"s3.endpoint", "%q is not an http(s) URL; write it like http://127.0.0.1:9000", s3.Endpoint)
			}
		}
		if (s3.AccessKeyID == "") != (s3.SecretAccessKey == "") {
			v.ps.add(p+"s3", "set both access_key_id and secret_access_key (the secret preferably with %s), or neither to use the AWS credential chain", EnvName(p+"s3.secret_access_key"))
		}
	}
	if n := ice.Maintenance.CompactEveryCommits; n < 1 && n != -1 {
		v.ps.add(p+"maintenance.compact_every_commits", "is %d; use a number of commits of at least 1, or -1 to turn compaction off", n)
	}
	v.maxCount(p+"maintenance.compact_every_commits", ice.Maintenance.CompactEveryCommits, MaxCompactEveryCommits, whyCompactions)
	if ice.Maintenance.ExpireSnapshotsAfter <= 0 {
		v.ps.add(p+"maintenance.expire_snapshots_after", "is %s; it must be positive, such as 24h", ice.Maintenance.ExpireSnapshotsAfter)
	}
	if d := ice.Maintenance.RemoveOrphansAfter; d < MinRemoveOrphansAfter {
		v.ps.add(p+"maintenance.remove_orphans_after", "is %s; use at least %s: a younger unreferenced file may belong to a commit still in flight", d, MinRemoveOrphansAfter)
	}
	if n := ice.CompressionLevel; n < MinCompressionLevel || n > MaxCompressionLevel {
		v.ps.add(p+"compression_level", "is %d; use a zstd level from %d (fastest, the default) to %d (smallest files)", n, MinCompressionLevel, MaxCompressionLevel)
	}
	if n := ice.PartitionBuckets; n < 0 {
		v.ps.add(p+"partition_buckets", "is %d; use 0 for unpartitioned tables, or a number of buckets", n)
	}
	v.maxCount(p+"partition_buckets", ice.PartitionBuckets, MaxPartitionBuckets, whyBuckets)
	if n := ice.TargetFileSizeBytes; n < MinTargetFileSize {
		v.ps.add(p+"target_file_size_bytes", "is %s; use at least %s: a smaller target makes files smaller than one Parquet row group", n, MinTargetFileSize)
	}
	v.maxSize(p+"target_file_size_bytes", ice.TargetFileSizeBytes, MaxTargetFileSize, whyFileSize)
}

func (v *validator) clickhouse(ch *ClickHouse) {
	v.hostPort("sink.clickhouse.addr", ch.Addr)
	if !batch.PlainName(ch.Database) {
		v.ps.add("sink.clickhouse.database", "%q is not allowed; use letters, digits and _ (not starting with a digit)", ch.Database)
	}
	switch ch.Schema {
	case SchemaAuto, SchemaModern, SchemaCompatible:
	default:
		v.ps.add("sink.clickhouse.schema", "%q is not a table layout; use auto, modern (ClickHouse 23.2 and later) or compatible", ch.Schema)
	}
	v.positive("sink.clickhouse.dial_timeout", ch.DialTimeout)
	v.positive("sink.clickhouse.read_timeout", ch.ReadTimeout)
	if ch.MaxOpenConns < 1 {
		v.ps.add("sink.clickhouse.max_open_conns", "is %d; use a positive number of connections, or leave it out for %d", ch.MaxOpenConns, DefaultClickHouseMaxOpenConns)
	}
	v.maxCount("sink.clickhouse.max_open_conns", ch.MaxOpenConns, MaxClickHouseOpenConns, whyOpenConns)
	v.clickhouseTLS(ch.TLS)
}

func (v *validator) clickhouseTLS(t ClickHouseTLS) {
	const p = "sink.clickhouse.tls"
	v.tls(p, t.TLS, t.On(), "other TLS keys are set")
	if t.InsecureSkipVerify && (t.CAFile != "" || t.ServerName != "") {
		v.ps.add(p+".insecure_skip_verify", "is true, so the server's certificate is not checked against ca_file or server_name; remove insecure_skip_verify (unsafe) to verify the server")
	}
}

// positive reports a duration at path that is not positive; left out, it takes its default.
func (v *validator) positive(path string, d Duration) {
	if d <= 0 {
		v.ps.add(path, "is %s; it must be positive, or left out for its default", d)
	}
}

func (v *validator) couchbase(cb *Couchbase) {
	const p = "sink.couchbase."
	if v.required(p+"connstr", cb.ConnStr, "set couchbase://host or couchbases://host") {
		if !strings.HasPrefix(cb.ConnStr, "couchbase://") && !strings.HasPrefix(cb.ConnStr, "couchbases://") {
			v.ps.add(p+"connstr", "not a Couchbase connection string; write couchbase://host or couchbases://host (TLS)")
		}
	}
	v.required(p+"username", cb.Username, "set the user Sluice writes as")
	v.required(p+"password", cb.Password, "set it with "+EnvName(p+"password"))
	if v.required(p+"bucket", cb.Bucket, "set the bucket that holds the target collections") &&
		(!collectionRe.MatchString(cb.Bucket) || len(cb.Bucket) > maxCouchbaseName) {
		v.ps.add(p+"bucket", "%q is not a bucket name; use up to %d letters, digits, _, - and %%", cb.Bucket, maxCouchbaseName)
	}
	v.couchbaseName(p+"scope", "scope", cb.Scope)
	v.couchbaseName(p+"metadata_collection", "collection", cb.MetadataCollection)
	switch cb.Durability {
	case DurabilityNone, DurabilityMajority, DurabilityMajorityAndPersistActive, DurabilityPersistToMajority:
	default:
		v.ps.add(p+"durability", "%q is not a durability level; use none, majority, majority_and_persist_active or persist_to_majority", cb.Durability)
	}
	if cb.Concurrency < 1 {
		v.ps.add(p+"concurrency", "is %d; use a positive number of operations in flight, or leave it out for %d", cb.Concurrency, DefaultCouchbaseConcurrency)
	}
	v.maxCount(p+"concurrency", cb.Concurrency, MaxCouchbaseConcurrency, whyConcurrency)
	v.positive(p+"timeout", cb.Timeout)
}

// maxCouchbaseName is the longest bucket, scope or collection name Couchbase accepts.
const maxCouchbaseName = 251

// couchbaseName checks a scope or collection name: Couchbase's characters, and no leading _ or
// %, which Couchbase reserves, except the _default scope and collection.
func (v *validator) couchbaseName(path, what, name string) {
	switch {
	case !collectionRe.MatchString(name) || len(name) > maxCouchbaseName:
		v.ps.add(path, "%q is not a %s name; use up to %d letters, digits, _, - and %%", name, what, maxCouchbaseName)
	case name != DefaultCouchbaseScope && (name[0] == '_' || name[0] == '%'):
		v.ps.add(path, "%q is not a %s name; only _default may start with _ or %%", name, what)
	}
}

// Validate fills in the defaults of the section's unset settings and checks it as
// Config.Validate does, reporting problems by their full key path (sink.iceberg...). The sink
// calls it on the section it is given, so one built in Go meets the same rules as a file.
func (ice *Iceberg) Validate() error {
	v := validator{ps: &problems{skip: map[string]bool{}}}
	ice.applyDefaults()
	v.iceberg(ice)
	return v.ps.err()
}

// Validate fills in the defaults of the section's unset settings and checks it; see
// Iceberg.Validate.
func (ch *ClickHouse) Validate() error {
	v := validator{ps: &problems{skip: map[string]bool{}}}
	ch.applyDefaults()
	v.clickhouse(ch)
	return v.ps.err()
}

// Validate fills in the defaults of the section's unset settings and checks it; see
// Iceberg.Validate.
func (cb *Couchbase) Validate() error {
	v := validator{ps: &problems{skip: map[string]bool{}}}
	cb.applyDefaults()
	v.couchbase(cb)
	return v.ps.err()
}
