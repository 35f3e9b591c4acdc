package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

// Validate fills in the defaults of unset settings (ApplyDefaults), then checks every setting.
// The error is an *Error listing every problem with its key path and the fix. A zero number
// counts as unset here; Parse, Load and FromJSON, which see the input, reject an explicit 0.
func (c *Config) Validate() error {
	return c.finish(nil)
}

// validator checks a config, adding problems to ps. present holds the key paths the input set
// (nil when validating a Config built in Go).
type validator struct {
	ps      *problems
	present map[string]bool
}

// finish rejects explicit zeros, applies defaults and validates; d is the decoder that produced
// c, or nil.
func (c *Config) finish(d *decoder) error {
	v := validator{ps: &problems{skip: map[string]bool{}}}
	if d != nil {
		v = validator{ps: d.ps, present: d.present}
	}
	v.readSecretFiles(c)
	v.explicitZeros(c)
	c.ApplyDefaults()
	v.config(c)
	return v.ps.err()
}

// explicitZeros rejects a 0 the input wrote for a setting whose default ApplyDefaults would
// otherwise put in silently.
func (v *validator) explicitZeros(c *Config) {
	zero := func(path string, isZero bool, def any) {
		if isZero && v.present[path] {
			v.ps.add(path, "must not be 0; remove the key to use the default %v", def)
			v.ps.skip[path] = true
		}
	}
	zero("source.snapshot_chunk_rows", c.Source.SnapshotChunkRows == 0, DefaultSnapshotChunkRows)
	zero("source.snapshot_chunk_bytes", c.Source.SnapshotChunkBytes == 0, DefaultSnapshotChunkBytes)
	zero("source.snapshot_parallelism", c.Source.SnapshotParallelism == 0, DefaultSnapshotParallelism)
	zero("batch.max_rows", c.Batch.MaxRows == 0, batch.DefaultMaxRows)
	zero("batch.max_bytes", c.Batch.MaxBytes == 0, ByteSize(batch.DefaultMaxBytes))
	zero("batch.max_wait", c.Batch.MaxWait == 0, Duration(batch.DefaultMaxWait))
	if ice := c.Sink.Iceberg; ice != nil {
		if p := "sink.iceberg.maintenance.compact_every_commits"; ice.Maintenance.CompactEveryCommits == 0 && v.present[p] {
			v.ps.add(p, "must not be 0; write -1 to turn compaction off, or remove the key to use the default %d", DefaultCompactEveryCommits)
			v.ps.skip[p] = true
		}
		zero("sink.iceberg.maintenance.expire_snapshots_after", ice.Maintenance.ExpireSnapshotsAfter == 0, DefaultExpireSnapshotsAfter)
		zero("sink.iceberg.compression_level", ice.CompressionLevel == 0, DefaultCompressionLevel)
		zero("sink.iceberg.target_file_size_bytes", ice.TargetFileSizeBytes == 0, DefaultTargetFileSizeBytes)
	}
	if ch := c.Sink.ClickHouse; ch != nil {
		zero("sink.clickhouse.dial_timeout", ch.DialTimeout == 0, DefaultClickHouseDialTimeout)
		zero("sink.clickhouse.read_timeout", ch.ReadTimeout == 0, DefaultClickHouseReadTimeout)
		zero("sink.clickhouse.max_open_conns", ch.MaxOpenConns == 0, DefaultClickHouseMaxOpenConns)
	}
	if cb := c.Sink.Couchbase; cb != nil {
		zero("sink.couchbase.concurrency", cb.Concurrency == 0, DefaultCouchbaseConcurrency)
		zero("sink.couchbase.timeout", cb.Timeout == 0, DefaultCouchbaseTimeout)
	}
}

// required reports an unset setting, naming its environment variable when it is a secret.
func (v *validator) required(path, value, hint string) bool {
	if strings.TrimSpace(value) != "" {
		return true
	}
	v.ps.add(path, "missing; %s", hint)
	return false
}

// config checks every section.
func (v *validator) config(c *Config) {
	switch {
	case c.Pipeline == "":
		v.ps.add("pipeline", "missing; name the pipeline with lower-case letters, digits, _ and -, such as orders_to_lake")
	case !pipelineRe.MatchString(c.Pipeline):
		v.ps.add("pipeline", "%q is not allowed; use lower-case letters, digits, _ and - (starting with a letter or digit), since it is part of workflow IDs and slot names", c.Pipeline)
	case len(c.Pipeline) > maxPipelineLen:
		v.ps.add("pipeline", "%q is %d characters long; use at most %d so that the slot name sluice_<pipeline> fits Postgres' 63", c.Pipeline, len(c.Pipeline), maxPipelineLen)
	}
	v.source(&c.Source)
	v.temporal(&c.Temporal)
	if v.required("staging.url", c.Staging.URL, "set a directory, file:///dir or s3://bucket/prefix?region=... for batch files") {
		v.stagingURL("staging.url", c.Staging.URL)
	}
	v.batch(&c.Batch)
	v.sink(&c.Sink)
	v.tables(c)
}

func (v *validator) source(s *Source) {
	if v.required("source.dsn", s.DSN, "set a postgres:// URL or key=value connection string, preferably with "+EnvName("source.dsn")) {
		if err := checkDSN(s.DSN); err != nil {
			v.ps.add("source.dsn", "%v", err)
		}
	}
	if s.Slot != "" && !batch.ValidSlotName(s.Slot) {
		v.ps.add("source.slot", "%q is not a valid slot name; Postgres allows lower-case letters, digits and _, at most 63 characters", s.Slot)
	}
	if s.Publication != "" && (!publicationRe.MatchString(s.Publication) || len(s.Publication) > batch.MaxNameLen) {
		v.ps.add("source.publication", "%q is not allowed; use lower-case letters, digits and _ (not starting with a digit), at most 63 characters", s.Publication)
	}
	if s.SnapshotChunkRows < 1 {
		v.ps.add("source.snapshot_chunk_rows", "is %d; it must be at least 1 (default %d)", s.SnapshotChunkRows, DefaultSnapshotChunkRows)
	}
	v.maxCount("source.snapshot_chunk_rows", s.SnapshotChunkRows, MaxSnapshotChunkRows, whyChunkRows)
	if s.SnapshotChunkBytes < KiB {
		v.ps.add("source.snapshot_chunk_bytes", "is %d bytes; it must be at least 1KiB (a bare number counts bytes: write 16MiB for 16 mebibytes)", int64(s.SnapshotChunkBytes))
	}
	v.maxSize("source.snapshot_chunk_bytes", s.SnapshotChunkBytes, MaxBatchBytes, whyBatchBytes)
	if s.SnapshotParallelism < 1 {
		v.ps.add("source.snapshot_parallelism", "is %d; it must be at least 1 (default %d)", s.SnapshotParallelism, DefaultSnapshotParallelism)
	}
	v.maxCount("source.snapshot_parallelism", s.SnapshotParallelism, MaxSnapshotParallelism, whySnapshotParallelism)
	if p := "source.max_parallel_backfills"; s.MaxParallelBackfills < 0 || (s.MaxParallelBackfills == 0 && v.present[p]) {
		v.ps.add(p, "is %d; it must be at least 1, or remove the key to use what the server has free", s.MaxParallelBackfills)
	}
	v.maxCount("source.max_parallel_backfills", s.MaxParallelBackfills, MaxParallelBackfills, whyParallelBackfills)
}

// checkDSN checks the shape of a Postgres connection string without connecting. Its errors
// never repeat the DSN, which may hold a password.
func checkDSN(dsn string) error {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if _, err := url.Parse(dsn); err != nil {
			return fmt.Errorf("not a valid postgres:// URL (check that special characters in the password are percent-encoded)")
		}
		return nil
	}
	if strings.Contains(dsn, "://") {
		return fmt.Errorf("unknown URL scheme; use postgres://user@host:5432/db or key=value pairs such as host=... dbname=...")
	}
	if !strings.Contains(dsn, "=") {
		return fmt.Errorf("not a connection string; use postgres://user@host:5432/db or key=value pairs such as host=... dbname=...")
	}
	return nil
}

func (v *validator) temporal(t *Temporal) {
	v.hostPort("temporal.address", t.Address)
	if strings.ContainsFunc(t.Namespace, isSpace) {
		v.ps.add("temporal.namespace", "%q contains white space", t.Namespace)
	}
	if strings.ContainsFunc(t.TaskQueue, isSpace) {
		v.ps.add("temporal.task_queue", "%q contains white space", t.TaskQueue)
	}
	v.tls("temporal.tls", t.TLS, t.On(), "other TLS keys or temporal.api_key are set")
}

// tls checks the TLS section at path: cert_file and key_file go together, and enabled: false
// is refused when the connection uses TLS anyway (on), because other settings (needs) ask for it.
func (v *validator) tls(path string, t TLS, on bool, needs string) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.ps.add(path, "cert_file and key_file go together; set both for a client certificate (mTLS), or neither")
	}
	if !t.Enabled && v.present[path+".enabled"] && on {
		v.ps.add(path+".enabled", "is false, but %s, which need TLS; remove enabled: false", needs)
	}
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// hostPort checks a host:port address.
func (v *validator) hostPort(path, addr string) {
	if !v.required(path, addr, "set host:port") {
		return
	}
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		v.ps.add(path, "%q is not host:port; write it like 127.0.0.1:7233 (IPv6 as [::1]:7233)", addr)
	}
}

// stagingURL checks a location whose s3:// query holds only the parameters the staging store
// reads (staging.CheckS3Query, which staging.Open applies too).
func (v *validator) stagingURL(path, loc string) {
	if !v.location(path, loc) {
		return
	}
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "s3" {
		return
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		v.ps.add(path, "the query is not valid URL encoding; percent-encode & = and %% inside values")
		return
	}
	if err := staging.CheckS3Query(q); err != nil {
		v.ps.add(path, "%v", err)
	}
}

// location checks a directory path, file:// URL or s3://bucket/prefix URL.
// It reports whether loc is valid.
func (v *validator) location(path, loc string) bool {
	if !strings.Contains(loc, "://") {
		return true
	}
	n := len(v.ps.list)
	u, err := url.Parse(loc)
	switch {
	case err != nil:
		v.ps.add(path, "%q is not a valid URL", loc)
	case u.Scheme == "file":
		if u.Path == "" {
			v.ps.add(path, "%q has no directory; write file:///absolute/dir", loc)
		}
	case u.Scheme == "s3":
		if u.Host == "" {
			v.ps.add(path, "%q has no bucket; write s3://bucket/prefix", loc)
		}
	default:
		v.ps.add(path, "scheme %q is not supported; use a directory path, file:///dir or s3://bucket/prefix", u.Scheme)
	}
	return len(v.ps.list) == n
}

func (v *validator) batch(b *Batch) {
	if b.MaxRows < 1 {
		v.ps.add("batch.max_rows", "is %d; it must be at least 1 (default %d)", b.MaxRows, batch.DefaultMaxRows)
	}
	v.maxCount("batch.max_rows", b.MaxRows, MaxBatchRows, whyRows)
	if b.MaxBytes < KiB {
		v.ps.add("batch.max_bytes", "is %d bytes; it must be at least 1KiB (a bare number counts bytes: write 64MiB for 64 mebibytes)", int64(b.MaxBytes))
	}
	v.maxSize("batch.max_bytes", b.MaxBytes, MaxBatchBytes, whyBatchBytes)
	if b.MaxWait <= 0 {
		v.ps.add("batch.max_wait", "is %s; it must be positive, such as 1s (default %s)", b.MaxWait, Duration(batch.DefaultMaxWait))
	}
}
