package config

import (
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// Config is one pipeline: a Postgres source, the tables to replicate and one sink. Its json tags
// are the config keys, so a config file may be YAML or JSON. The workers keep it (with its
// secrets); workflows receive only the names and limits derived from it (package pipeline).
type Config struct {
	// Pipeline names the pipeline: [a-z0-9][a-z0-9_-]*, at most 56 characters. It is part of the
	// Temporal workflow IDs and of the default slot and publication names.
	Pipeline string   `json:"pipeline"`
	Source   Source   `json:"source"`
	Temporal Temporal `json:"temporal"`
	Staging  Staging  `json:"staging"`
	Batch    Batch    `json:"batch"`
	Sink     Sink     `json:"sink"`
	Tables   []Table  `json:"tables"`
}

// Source is the Postgres database to replicate from.
type Source struct {
	// DSN is a libpq connection string or postgres:// URL. It holds a secret: set it with
	// SLUICE_SOURCE_DSN rather than in the file. The replication connection is derived from it.
	DSN string `json:"dsn"`
	// DSNFile names a file holding DSN (a mounted secret); SLUICE_SOURCE_DSN_FILE sets it.
	DSNFile string `json:"dsn_file,omitempty"`
	// Slot is the logical replication slot (default sluice_<pipeline>, with - turned into _).
	Slot string `json:"slot"`
	// Publication is the publication the slot decodes (default: the same name as Slot).
	Publication string `json:"publication"`
	// SnapshotChunkRows is the number of rows per SELECT of a backfill (default 50000).
	SnapshotChunkRows int `json:"snapshot_chunk_rows"`
	// SnapshotChunkBytes bounds a backfill chunk by bytes too: each chunk's row limit is what
	// this holds at the previous chunk's bytes per row (default 16MiB).
	SnapshotChunkBytes ByteSize `json:"snapshot_chunk_bytes"`
	// SnapshotParallelism is how many key ranges of one table a backfill reads at once, each
	// on a connection of its own importing the snapshot (default 1).
	SnapshotParallelism int `json:"snapshot_parallelism"`
	// MaxParallelBackfills is how many tables one worker backfills at once, each holding a
	// temporary replication slot and a walsender while it copies. 0 (the key absent): what the
	// server has free, read when the worker starts (source.BackfillCapacity).
	MaxParallelBackfills int `json:"max_parallel_backfills,omitempty"`
}

// Temporal is the Temporal frontend the pipeline's workflows run on.
type Temporal struct {
	Address   string `json:"address"`    // host:port (default 127.0.0.1:7233)
	Namespace string `json:"namespace"`  // default "default"
	TaskQueue string `json:"task_queue"` // default "sluice-<pipeline>"
	// APIKey authenticates to Temporal Cloud (or a cluster that takes API keys) as a bearer
	// token; it turns TLS on. Secret: set it with api_key_file or SLUICE_TEMPORAL_API_KEY.
	APIKey     string `json:"api_key,omitempty"`
	APIKeyFile string `json:"api_key_file,omitempty"` // file holding api_key
	// TLS secures the connection to the frontend; off unless a key of it (or api_key) is set.
	TLS TLS `json:"tls"`
}

// On reports whether the connection uses TLS: a TLS key or an API key set.
func (t Temporal) On() bool { return t.TLS.On() || t.APIKey != "" }

// Staging is where the reader stages batch files for the committers.
type Staging struct {
	// URL is a directory path, a file:// URL or s3://bucket/prefix?endpoint=...&region=...
	URL string `json:"url"`
}

// Batch bounds the batches the reader cuts per table: a batch is cut when any limit is reached.
type Batch struct {
	MaxRows  int      `json:"max_rows"`  // default batch.DefaultMaxRows
	MaxBytes ByteSize `json:"max_bytes"` // default batch.DefaultMaxBytes
	MaxWait  Duration `json:"max_wait"`  // time since the batch's first row (default batch.DefaultMaxWait)
}

// The sink types.
const (
	SinkIceberg    = "iceberg"
	SinkClickHouse = "clickhouse"
	SinkCouchbase  = "couchbase"
	SinkPlugin     = "plugin"
)

// Sink is the destination. Exactly the section named by Type is set.
type Sink struct {
	Type       string      `json:"type"` // iceberg, clickhouse, couchbase or plugin
	Iceberg    *Iceberg    `json:"iceberg,omitempty"`
	ClickHouse *ClickHouse `json:"clickhouse,omitempty"`
	Couchbase  *Couchbase  `json:"couchbase,omitempty"`
	Plugin     *Plugin     `json:"plugin,omitempty"`
}

// Iceberg is an Apache Iceberg destination: a catalog and a warehouse.
type Iceberg struct {
	Catalog IcebergCatalog `json:"catalog"`
	// Warehouse is where data files go: a directory, a file:// URL or an s3://bucket/prefix URL.
	Warehouse string `json:"warehouse"`
	// S3 configures access to an s3:// warehouse; only allowed with one.
	S3 *S3 `json:"s3,omitempty"`
	// Maintenance bounds the small files and snapshots that one commit per batch accumulates.
	Maintenance IcebergMaintenance `json:"maintenance"`
	// CompressionLevel is the zstd level (1 to 22, default 1) of the Parquet data files of the
	// tables the sink creates: their write.parquet.compression-level property, which compaction
	// rewrites at too. Existing tables keep their property.
	CompressionLevel int `json:"compression_level,omitempty"`
	// PartitionBuckets, when positive, partitions new tables by bucket(N) of the first key
	// column; 0 (the default) creates unpartitioned tables. Existing tables keep their spec.
	PartitionBuckets int `json:"partition_buckets,omitempty"`
	// TargetFileSizeBytes is the data file size compaction aims for (default 128MiB).
	TargetFileSizeBytes ByteSize `json:"target_file_size_bytes,omitempty"`
}

// The Iceberg catalog types and SQL catalog dialects.
const (
	CatalogSQL      = "sql"
	CatalogREST     = "rest"
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

// IcebergCatalog is the catalog that holds the Iceberg tables' metadata pointers.
type IcebergCatalog struct {
	Type string `json:"type"` // sql or rest
	// URI is, for sql, a sqlite file path or file: URI (dialect sqlite) or a Postgres DSN
	// (dialect postgres); for rest, the catalog's http(s) URL.
	URI     string `json:"uri"`
	URIFile string `json:"uri_file,omitempty"` // file holding URI (a Postgres catalog DSN holds a password)
	Dialect string `json:"dialect,omitempty"`  // sql only: sqlite (default) or postgres
	Name    string `json:"name"`               // catalog name (default "sluice")
	// Credential is a rest catalog's OAuth2 client credential (client_id:client_secret), which the
	// catalog exchanges for a token. Secret: set it with SLUICE_SINK_ICEBERG_CATALOG_CREDENTIAL.
	Credential     string `json:"credential,omitempty"`
	CredentialFile string `json:"credential_file,omitempty"` // file holding Credential
	// Token is a rest catalog's bearer token. Secret: set it with SLUICE_SINK_ICEBERG_CATALOG_TOKEN.
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"token_file,omitempty"` // file holding Token
}

// S3 is how to reach an S3-compatible object store.
type S3 struct {
	Endpoint        string `json:"endpoint,omitempty"` // http(s) URL; empty for AWS
	Region          string `json:"region"`
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"` // secret: set with SLUICE_SINK_ICEBERG_S3_SECRET_ACCESS_KEY
	// SecretAccessKeyFile names a file holding SecretAccessKey.
	SecretAccessKeyFile string `json:"secret_access_key_file,omitempty"`
}

// IcebergMaintenance schedules the table maintenance the Iceberg sink runs between commits.
type IcebergMaintenance struct {
	// CompactEveryCommits compacts data files and rewrites manifests after this many commits to
	// a table (default 100; 0 keeps the default, -1 turns maintenance off, snapshot
	// expiry included).
	CompactEveryCommits int `json:"compact_every_commits"`
	// ExpireSnapshotsAfter expires snapshots older than this (default 24h).
	ExpireSnapshotsAfter Duration `json:"expire_snapshots_after"`
	// RemoveOrphansAfter deletes files under a table's location that no snapshot references once
	// they are older than this (default 1h): files of commits that failed with an unknown
	// outcome. Younger files are kept, as they may belong to a commit in flight.
	RemoveOrphansAfter Duration `json:"remove_orphans_after"`
}

// ClickHouse is a ClickHouse destination reached over the native protocol.
type ClickHouse struct {
	Addr     string `json:"addr"`               // host:port of the native protocol (usually 9000, 9440 with TLS)
	Database string `json:"database"`           // database of targets without one (default "default")
	Username string `json:"username"`           // default "default"
	Password string `json:"password,omitempty"` // secret: set with SLUICE_SINK_CLICKHOUSE_PASSWORD
	// PasswordFile names a file holding Password.
	PasswordFile string `json:"password_file,omitempty"`
	// TLS secures the connection (the native protocol's TLS port, usually 9440); off unless a
	// key of it is set. `tls: true` is short for `tls: {enabled: true}`.
	TLS ClickHouseTLS `json:"tls"`
	// Schema is the layout of new tables: SchemaAuto, SchemaModern or SchemaCompatible.
	Schema       string   `json:"schema,omitempty"`
	DialTimeout  Duration `json:"dial_timeout,omitempty"`   // bounds connecting (default 10s)
	ReadTimeout  Duration `json:"read_timeout,omitempty"`   // bounds one insert or query reply (default 5m)
	MaxOpenConns int      `json:"max_open_conns,omitempty"` // connection pool size (default 8)
}

// The table layouts of sink.clickhouse.schema.
const (
	// SchemaAuto picks SchemaModern on servers that support it (23.2 and later) and
	// SchemaCompatible on older ones. Existing tables keep the layout they were created with.
	SchemaAuto = "auto"
	// SchemaModern creates ReplacingMergeTree(_version, _is_deleted) tables, whose FINAL hides
	// tombstones, with Date32, DateTime64(6) and Bool columns. It needs ClickHouse 23.2 or later
	// and is refused when the sink starts on an older server.
	SchemaModern = "modern"
	// SchemaCompatible creates ReplacingMergeTree(_version) tables with the deleted flag as a
	// plain column and a <table>_current view that hides tombstones, with Date, DateTime and
	// UInt8 columns. It works on every server the sink supports (18.16 and later).
	SchemaCompatible = "compatible"
)

// The reactions of tables[].on_drop_column to a source column dropped.
const (
	// DropColumnResync (the default) backfills the table again from a new snapshot: the sink
	// keeps the dropped column, NULL in every row, and equals the source over the others.
	DropColumnResync = "resync"
	// DropColumnKeep follows the stream: rows written since have NULL in the dropped column,
	// rows not changed since keep the last value they had there.
	DropColumnKeep = "keep"
)

// The durability levels of sink.couchbase.durability. With DurabilityNone a failover of a node
// can lose acknowledged documents while the checkpoint written after them survives: rows can be
// lost. Use it only on a bucket without replicas that you can afford to resync.
const (
	DurabilityNone                     = "none"
	DurabilityMajority                 = "majority"
	DurabilityMajorityAndPersistActive = "majority_and_persist_active"
	DurabilityPersistToMajority        = "persist_to_majority"
)

// Couchbase is a Couchbase destination; each target is a collection of Bucket.
type Couchbase struct {
	ConnStr  string `json:"connstr"` // couchbase://host or couchbases://host
	Username string `json:"username"`
	Password string `json:"password,omitempty"` // secret: set with SLUICE_SINK_COUCHBASE_PASSWORD
	// PasswordFile names a file holding Password.
	PasswordFile string `json:"password_file,omitempty"`
	Bucket       string `json:"bucket"`
	Scope        string `json:"scope"` // scope of targets without one (default "_default")
	// MetadataCollection holds the sink's checkpoint and key-index documents in each target's
	// scope (default "sluice_meta").
	MetadataCollection string `json:"metadata_collection,omitempty"`
	// Durability of every write: DurabilityNone, DurabilityMajority (default),
	// DurabilityMajorityAndPersistActive or DurabilityPersistToMajority.
	Durability  string   `json:"durability,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"` // KV operations in flight per batch (default 32)
	Timeout     Duration `json:"timeout,omitempty"`     // bounds each KV operation and connecting (default 30s)
}

// Plugin is an external sink process reached over gRPC (the protocol of sinks/plugin).
type Plugin struct {
	Address string `json:"address"` // host:port of the plugin's gRPC server
	// Token is the bearer token sent with every call; it needs TLS. Secret: set it with
	// token_file or SLUICE_SINK_PLUGIN_TOKEN.
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"token_file,omitempty"` // file holding Token
	// TLS secures the connection; off unless a key of it is set.
	TLS TLS `json:"tls"`
	// PositionStore is where the workers keep the committed positions of a plugin without a
	// position of its own (sinks/plugin/positionstore).
	PositionStore PluginPositionStore `json:"position_store"`
}

// PluginPositionStore is the Postgres database and schema of a plugin's position store.
type PluginPositionStore struct {
	// DSN is the database holding the store; empty: the source database (source.dsn). Secret:
	// set it with dsn_file or SLUICE_SINK_PLUGIN_POSITION_STORE_DSN.
	DSN     string `json:"dsn,omitempty"`
	DSNFile string `json:"dsn_file,omitempty"` // file holding DSN
	Schema  string `json:"schema,omitempty"`   // schema of the store's table (default "sluice")
}

// PositionStoreDSN is the database of the plugin's position store: sink.plugin.position_store.dsn,
// else the source database.
func (c *Config) PositionStoreDSN() string {
	if pl := c.Sink.Plugin; pl != nil && pl.PositionStore.DSN != "" {
		return pl.PositionStore.DSN
	}
	return c.Source.DSN
}

// Table is one replicated table.
type Table struct {
	// Source is the schema-qualified Postgres table, in SQL syntax: shop.orders, or
	// shop."Order Items" for a name that needs quoting (unquoted names fold to lower case).
	Source string `json:"source"`
	// Target is the destination table: namespace.table (Iceberg), [database.]table (ClickHouse),
	// [scope.]collection (Couchbase), or any dotted name a plugin understands.
	Target string `json:"target"`
	// Metadata lists the context columns to materialize, with their names: the context column
	// __<From> (From one of batch.MetadataNames: op, pos, commit_ts, ingest_ts, snapshot or
	// phase) as the destination column As, in the sink's own shape.
	Metadata []sinks.MetadataColumn `json:"metadata,omitempty"`
	// Key overrides the source's primary key (column names in SQL syntax); nil keeps it.
	Key []string `json:"key,omitempty"`
	// Columns, when set, replicates only these columns (SQL syntax): the publication's column
	// list for the table. It must hold the key and the replica identity's columns.
	Columns []string `json:"columns,omitempty"`
	// ExcludeColumns replicates every column but these (SQL syntax); not with Columns.
	ExcludeColumns []string `json:"exclude_columns,omitempty"`
	// Where is a row filter in SQL (the publication's WHERE for the table, Postgres 15+): only
	// rows for which it is true are replicated, and the backfill reads with the same WHERE.
	Where string `json:"where,omitempty"`
	// OnPartitionChange is how a partitioned table reacts to a partition change the WAL cannot
	// show (a partition attached with rows, detached, dropped or truncated): resync (the
	// default) or stop.
	OnPartitionChange string `json:"on_partition_change,omitempty"`
	// OnRecreate is how the table reacts when the reader finds it is no longer the table the
	// sink's content corresponds to (dropped and re-created: a new relation OID) or that the
	// publication stopped carrying some of its changes for a while (it left the publication, or
	// the publish flags changed): stop (the default) or resync.
	OnRecreate string `json:"on_recreate,omitempty"`
	// OnDropColumn is what the table does when a source column is dropped (the sink keeps the
	// column): resync (the default: the target is backfilled again, so the column is NULL in
	// every row) or keep (the rows not changed since keep their last value there).
	OnDropColumn string `json:"on_drop_column,omitempty"`
	// OnRewrite is how a table reacts to a rewrite of its values the WAL cannot show (ALTER
	// COLUMN ... TYPE to the same type with USING, or a widening that rewrites the table):
	// resync (the default) or stop.
	OnRewrite string `json:"on_rewrite,omitempty"`
	// Iceberg is the target's partitioning, sort order and properties (sink.type iceberg only).
	Iceberg *TableIceberg `json:"iceberg,omitempty"`
}

// SourceName returns the parsed source table; ok is false when Source is not a valid
// schema-qualified name (Validate reports it).
func (t Table) SourceName() (name batch.TableName, ok bool) {
	name, err := batch.ParseTableName(t.Source)
	return name, err == nil
}

// KeyColumns returns the key override as column names (quotes removed, unquoted names folded
// to lower case), or nil when the table keeps its primary key.
func (t Table) KeyColumns() []string { return columnNames(t.Key) }

// IncludedColumns returns Columns as column names (as KeyColumns does), nil when unset.
func (t Table) IncludedColumns() []string { return columnNames(t.Columns) }

// ExcludedColumns returns ExcludeColumns as column names (as KeyColumns does), nil when unset.
func (t Table) ExcludedColumns() []string { return columnNames(t.ExcludeColumns) }

// columnNames turns column names in SQL syntax into the names Postgres stores; nil stays nil.
func columnNames(list []string) []string {
	if list == nil {
		return nil
	}
	cols := make([]string, 0, len(list))
	for _, k := range list {
		name, err := batch.ParseIdent(k)
		if err != nil {
			name = k
		}
		cols = append(cols, name)
	}
	return cols
}

// Table returns the configured table whose source is source (in the same SQL syntax, so
// "Shop.Orders" finds shop.orders).
func (c *Config) Table(source string) (Table, bool) {
	want, ok := Table{Source: source}.SourceName()
	if !ok {
		return Table{}, false
	}
	for _, t := range c.Tables {
		if got, ok := t.SourceName(); ok && got == want {
			return t, true
		}
	}
	return Table{}, false
}
