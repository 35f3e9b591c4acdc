package config

// Upper bounds of the sizes and counts. Each is where a larger value stops helping and starts
// to hurt; the message of a value above it gives the reason, and docs/config.md lists them.
const (
	// MaxBatchBytes bounds batch.max_bytes: a batch's text column is one Arrow string array,
	// whose 32-bit offsets hold at most 2GiB, and the worker holds about five batches in memory
	// (its default soft memory limit is five times batch.max_bytes).
	MaxBatchBytes = 1 * GiB
	// MaxBatchRows bounds batch.max_rows: every buffered row costs at least about 128 bytes of
	// bookkeeping that batch.max_bytes does not count (more with more columns), so ten million
	// rows hold over a GiB of memory before their values.
	MaxBatchRows = 10_000_000
	// MaxSnapshotChunkRows bounds source.snapshot_chunk_rows: a chunk is read into one Arrow
	// record in the worker's memory, bounded by no byte limit, while the next is read ahead.
	MaxSnapshotChunkRows = 10_000_000
	// MaxParallelBackfills bounds source.max_parallel_backfills: Postgres' max_wal_senders and
	// max_replication_slots are at most 262143, and each backfill also holds a connection.
	MaxParallelBackfills = 1000
	// MaxSnapshotParallelism bounds source.snapshot_parallelism (source.MaxSnapshotConns).
	MaxSnapshotParallelism = 32
	// MaxPartitionBuckets bounds sink.iceberg.partition_buckets: each commit writes up to one data
	// file and one delete file per bucket its rows fall in, so more buckets only multiply small
	// files that compaction then has to merge.
	MaxPartitionBuckets = 1024
	// MinTargetFileSize and MaxTargetFileSize bound sink.iceberg.target_file_size_bytes.
	// Compaction rewrites a file on every run until it reaches 75% of the target: a larger
	// target rewrites the same rows many times over, a smaller one makes files smaller than a
	// Parquet row group (Iceberg's own default target is 512MiB).
	MinTargetFileSize = 1 * MiB
	MaxTargetFileSize = 2 * GiB
	// MaxCompactEveryCommits bounds sink.iceberg.maintenance.compact_every_commits: each commit
	// rewrites the table's metadata file, which lists every snapshot until maintenance expires
	// them, so the cost of a commit grows with the commits between two maintenance runs.
	MaxCompactEveryCommits = 10_000
	// MinRemoveOrphansAfter bounds sink.iceberg.maintenance.remove_orphans_after from below: a
	// commit writes its files before the catalog makes them referenced, and a commit of a slow
	// catalog or object store, or an attempt that outlived its heartbeat, can take minutes.
	MinRemoveOrphansAfter = Duration(10 * 60 * 1e9) // 10m
	// MinCompressionLevel and MaxCompressionLevel are zstd's levels.
	MinCompressionLevel = 1
	MaxCompressionLevel = 22
	// MaxClickHouseOpenConns bounds sink.clickhouse.max_open_conns: a worker runs at most 1000
	// activities at once (Temporal's default), so more connections are never used.
	MaxClickHouseOpenConns = 1000
	// MaxCouchbaseConcurrency bounds sink.couchbase.concurrency: gocb queues at most 2048
	// operations per node, and a second table's batch in flight needs room too.
	MaxCouchbaseConcurrency = 1024
)

// maxCount reports a count n above max at path, with the reason why.
func (v *validator) maxCount(path string, n, max int, why string) {
	if n > max {
		v.ps.add(path, "is %d; use at most %d: %s", n, max, why)
	}
}

// maxSize reports a size n above max at path, with the reason why.
func (v *validator) maxSize(path string, n, max ByteSize, why string) {
	if n > max {
		v.ps.add(path, "is %s; use at most %s: %s", n, max, why)
	}
}

// The reasons the messages give for the upper bounds.
const (
	whyBatchBytes          = "a batch's text column is one Arrow string array, which holds at most 2GiB, and the worker keeps about five batches in memory"
	whyRows                = "each buffered row costs about 128 bytes of bookkeeping beyond its values, so more rows would hold over a GiB of memory"
	whyChunkRows           = "a chunk is read whole into the worker's memory while the next one is read ahead"
	whySnapshotParallelism = "each range read at once holds a connection on the source and a chunk in the worker's memory"
	whyParallelBackfills   = "each backfill holds a replication slot, a walsender and a connection on the source"
	whyBuckets             = "every commit writes up to a data file and a delete file per bucket, so more buckets only make more small files"
	whyFileSize            = "compaction rewrites a file on every run until it reaches 75% of the target, so a larger target rewrites the same rows many times (Iceberg's own default is 512MiB)"
	whyCompactions         = "every commit rewrites the table metadata, which lists every snapshot until maintenance expires them, so commits slow down as they pile up"
	whyOpenConns           = "a worker runs at most 1000 activities at once (Temporal's default), so more connections are never used"
	whyConcurrency         = "gocb queues at most 2048 operations per node, and another table's batch in flight needs room too"
)
