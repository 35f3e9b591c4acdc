// Package iceberg is the Apache Iceberg sink: the last step of the data path for tables replicated
// into an Iceberg catalog (SQL on sqlite or PostgreSQL, or REST) with a local or S3 warehouse.
//
// Every batch becomes one merge-on-read commit (a RowDelta): an equality delete file holding the
// key of every row the batch changes or deletes, and one data file holding the last image of each
// upserted key. Copy-on-write deletes and overwrites are never used: on tables that already carry
// delete files they bring deleted rows back (iceberg-go issue #2042).
//
// The committed position (the batch's high watermark, a batch.SourcePosition as JSON) is written in
// the same commit as the data, twice: in the snapshot summary and in the table properties. Position
// reads the summary of the newest snapshot that carries it, walking back past snapshots written by
// maintenance (compaction, manifest rewrites), and falls back to the table property when expiry
// has removed those ancestors. The commit is a compare-and-swap on the branch head, so two writers
// of one table cannot both advance it from the same base.
//
// Tables are laid out as tables[].iceberg configures (partition.go): partitioned by identity,
// bucket, truncate or year/month/day/hour transforms, sorted, with extra properties; otherwise
// unpartitioned, or bucket(N) of the first key column with Config.PartitionBuckets. An equality
// delete reaches only data files of its own partition, and the batch knows only a row's key and
// new image, so on a table partitioned by other columns each delete is written with the key and
// partition columns of the row the table holds under that key (read at the branch head the
// commit is pinned to): an update that moves a row to another partition deletes it where it was.
//
// Maintain (sinks.Maintainer) compacts small data files and dead delete files, rewrites manifests,
// expires snapshots and removes orphan files while keeping the position readable; the TableWorkflow's MaintainTable
// activity calls it every N committed batches, with the options given in Options.Maintenance.
package iceberg
