package config

import "github.com/sluicecdc/sluice/batch"

// Defaults of the settings that have one; the batch section's are batch.DefaultMaxRows,
// DefaultMaxBytes and DefaultMaxWait, which a reader given no limits takes too.
const (
	DefaultSnapshotChunkRows           = 50000
	DefaultSnapshotChunkBytes          = 16 * MiB
	DefaultSnapshotParallelism         = 1
	DefaultTemporalAddress             = "127.0.0.1:7233"
	DefaultTemporalNamespace           = "default"
	DefaultCatalogName                 = "sluice"
	DefaultCompactEveryCommits         = 100
	DefaultExpireSnapshotsAfter        = Duration(24 * 3600 * 1e9) // 24h
	DefaultRemoveOrphansAfter          = Duration(3600 * 1e9)      // 1h
	DefaultCompressionLevel            = 1                         // zstd's fastest
	DefaultTargetFileSizeBytes         = 128 * MiB
	DefaultClickHouseDatabase          = "default"
	DefaultClickHouseUsername          = "default"
	DefaultClickHouseSchema            = SchemaAuto
	DefaultClickHouseDialTimeout       = Duration(10 * 1e9)     // 10s
	DefaultClickHouseReadTimeout       = Duration(5 * 60 * 1e9) // 5m
	DefaultClickHouseMaxOpenConns      = 8
	DefaultCouchbaseScope              = "_default"
	DefaultCouchbaseMetadataCollection = "sluice_meta"
	DefaultCouchbaseDurability         = DurabilityMajority
	DefaultCouchbaseConcurrency        = 32
	DefaultCouchbaseTimeout            = Duration(30 * 1e9) // 30s
	DefaultPositionStoreSchema         = "sluice"
)

// ApplyDefaults sets every unset (zero) setting that has a default. Settings that depend on
// others follow them: the slot and publication names are derived from a valid pipeline name. It is idempotent; Validate calls it.
func (c *Config) ApplyDefaults() {
	s := &c.Source
	if validPipeline(c.Pipeline) {
		setDefault(&s.Slot, DefaultSlotName(c.Pipeline))
		setDefault(&s.Publication, DefaultSlotName(c.Pipeline))
		setDefault(&c.Temporal.TaskQueue, DefaultTaskQueue(c.Pipeline))
	}
	setDefault(&s.SnapshotChunkRows, DefaultSnapshotChunkRows)
	setDefault(&s.SnapshotChunkBytes, DefaultSnapshotChunkBytes)
	setDefault(&s.SnapshotParallelism, DefaultSnapshotParallelism)
	setDefault(&c.Temporal.Address, DefaultTemporalAddress)
	setDefault(&c.Temporal.Namespace, DefaultTemporalNamespace)
	setDefault(&c.Batch.MaxRows, batch.DefaultMaxRows)
	setDefault(&c.Batch.MaxBytes, ByteSize(batch.DefaultMaxBytes))
	setDefault(&c.Batch.MaxWait, Duration(batch.DefaultMaxWait))
	if ice := c.Sink.Iceberg; ice != nil {
		ice.applyDefaults()
	}
	if ch := c.Sink.ClickHouse; ch != nil {
		ch.applyDefaults()
	}
	if cb := c.Sink.Couchbase; cb != nil {
		cb.applyDefaults()
	}
	if pl := c.Sink.Plugin; pl != nil {
		setDefault(&pl.PositionStore.Schema, DefaultPositionStoreSchema)
	}
	for i := range c.Tables {
		if len(c.Tables[i].Metadata) == 0 {
			c.Tables[i].Metadata = nil // "metadata: []" means none, as its JSON encoding does
		}
	}
}

func (ice *Iceberg) applyDefaults() {
	if ice.Catalog.Type == CatalogSQL {
		setDefault(&ice.Catalog.Dialect, DialectSQLite)
	}
	setDefault(&ice.Catalog.Name, DefaultCatalogName)
	setDefault(&ice.Maintenance.CompactEveryCommits, DefaultCompactEveryCommits)
	setDefault(&ice.Maintenance.ExpireSnapshotsAfter, DefaultExpireSnapshotsAfter)
	setDefault(&ice.Maintenance.RemoveOrphansAfter, DefaultRemoveOrphansAfter)
	setDefault(&ice.CompressionLevel, DefaultCompressionLevel)
	setDefault(&ice.TargetFileSizeBytes, DefaultTargetFileSizeBytes)
}

func (ch *ClickHouse) applyDefaults() {
	setDefault(&ch.Database, DefaultClickHouseDatabase)
	setDefault(&ch.Username, DefaultClickHouseUsername)
	setDefault(&ch.Schema, DefaultClickHouseSchema)
	setDefault(&ch.DialTimeout, DefaultClickHouseDialTimeout)
	setDefault(&ch.ReadTimeout, DefaultClickHouseReadTimeout)
	setDefault(&ch.MaxOpenConns, DefaultClickHouseMaxOpenConns)
}

func (cb *Couchbase) applyDefaults() {
	setDefault(&cb.Scope, DefaultCouchbaseScope)
	setDefault(&cb.MetadataCollection, DefaultCouchbaseMetadataCollection)
	setDefault(&cb.Durability, DefaultCouchbaseDurability)
	setDefault(&cb.Concurrency, DefaultCouchbaseConcurrency)
	setDefault(&cb.Timeout, DefaultCouchbaseTimeout)
}

// setDefault sets *p to def when *p is the zero value.
func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
