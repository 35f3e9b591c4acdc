package config

import (
	"net/url"
	"strings"
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
		v.hostPort("sink.plugin.address", s.Plugin.Address)
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
		if v.required(p+"catalog.uri", cat.URI, "set the REST catalog's URL, such as http://127.0.0.1:8181") {
			if u, err := url.Parse(cat.URI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.ps.add(p+"catalog.uri", "not an http(s) URL; write the REST catalog's URL, such as http://127.0.0.1:8181")
			}
		}
	default:
		v.ps.add(p+"catalog.type", "%q is not a catalog type; use sql or rest", cat.Type)
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
	if ice.Maintenance.ExpireSnapshotsAfter <= 0 {
		v.ps.add(p+"maintenance.expire_snapshots_after", "is %s; it must be positive, such as 24h", ice.Maintenance.ExpireSnapshotsAfter)
	}
}

func (v *validator) clickhouse(ch *ClickHouse) {
	v.hostPort("sink.clickhouse.addr", ch.Addr)
	if !identRe.MatchString(ch.Database) {
		v.ps.add("sink.clickhouse.database", "%q is not allowed; use letters, digits and _ (not starting with a digit)", ch.Database)
	}
	switch ch.Schema {
	case "", "auto", "modern", "compatible":
	default:
		v.ps.add("sink.clickhouse.schema", "%q is not a table layout; use auto, modern (ClickHouse 23.2 and later) or compatible", ch.Schema)
	}
	v.nonNegative("sink.clickhouse.dial_timeout", ch.DialTimeout)
	v.nonNegative("sink.clickhouse.read_timeout", ch.ReadTimeout)
	if ch.MaxOpenConns < 0 {
		v.ps.add("sink.clickhouse.max_open_conns", "is %d; use a positive number of connections, or leave it out for 8", ch.MaxOpenConns)
	}
}

// nonNegative reports a negative duration at path; zero means the setting's default.
func (v *validator) nonNegative(path string, d Duration) {
	if d < 0 {
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
	if v.required(p+"bucket", cb.Bucket, "set the bucket that holds the target collections") && !collectionRe.MatchString(cb.Bucket) {
		v.ps.add(p+"bucket", "%q is not a bucket name; use letters, digits, _, - and %%", cb.Bucket)
	}
	if !collectionRe.MatchString(cb.Scope) {
		v.ps.add(p+"scope", "%q is not a scope name; use letters, digits, _, - and %%", cb.Scope)
	}
	if cb.MetadataCollection != "" && !collectionRe.MatchString(cb.MetadataCollection) {
		v.ps.add(p+"metadata_collection", "%q is not a collection name; use letters, digits, _, - and %%", cb.MetadataCollection)
	}
	switch cb.Durability {
	case "", "none", "majority", "majority_and_persist_active", "persist_to_majority":
	default:
		v.ps.add(p+"durability", "%q is not a durability level; use none, majority, majority_and_persist_active or persist_to_majority", cb.Durability)
	}
	if cb.Concurrency < 0 || cb.Concurrency > 1024 {
		v.ps.add(p+"concurrency", "is %d; use 1 to 1024 operations in flight, or leave it out for 32", cb.Concurrency)
	}
	v.nonNegative(p+"timeout", cb.Timeout)
}
