// Package partitions notices the partition changes of a replicated partitioned table that the
// WAL cannot show, and says how the table must react.
//
// Replicated through its root (publish_via_partition_root), a partitioned table's row changes
// stream, but some partition maintenance changes the root's rows without any: ATTACH PARTITION
// of a table that holds rows (they were never inserted through the root), DETACH PARTITION and
// DROP of a partition (its rows leave without deletes), and TRUNCATE of one partition (pgoutput
// publishes a TRUNCATE only for the root then). The sink would diverge silently.
//
// So each partitioned table's partition set is recorded (Record: every partition's OID and
// storage, relfilenode) as its sink content corresponds to it: under the snapshot of every
// backfill (RecordSnapshot, the base), and whenever the reader accepts a change (a new, empty
// partition). The reader compares the current catalog with it periodically and at its start
// (Watcher.Check): a partition gone (detached, dropped), a partition's storage replaced
// (TRUNCATE, or a rewrite: VACUUM FULL, CLUSTER, ALTER TABLE ... TYPE, which the catalog does
// not tell apart) or a new partition that holds rows asks the table to react with its policy
// (resync, or stop); a new empty partition (the usual time partition made ahead of time) is
// accepted and recorded.
//
// The records live in the pipeline's staging store: every worker that backfills a table or reads
// the stream reaches it, it outlives worker restarts and continue-as-new, and it keeps the
// partition lists (which grow with a table's partitions) out of workflow histories. The base
// and the reader's record are two documents, each with one writer; the reader's names the base
// it extends (its epoch), so a backfill that completes while the reader writes is never
// overwritten by a record of the older content.
package partitions
