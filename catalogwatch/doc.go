// Package catalogwatch notices the changes to a replicated table's rows that the WAL cannot show
// but the catalog can, on every replicated table: rewrites of its values and, for a partitioned
// table, partition maintenance; and it says how the table must react.
//
// A rewrite: ALTER TABLE ... ALTER COLUMN ... TYPE rewrites every row's value without a row in
// the WAL, and when the type stays the same (TYPE int USING qty * 2) the stream's RELATION
// message does not change either. The rewrite gives the table new storage (pg_class.relfilenode)
// and, in the same transaction, writes the column's pg_attribute row (a new xmin); maintenance
// rewrites (VACUUM FULL, CLUSTER, pg_repack, SET TABLESPACE) give new storage without touching
// pg_attribute, and so does a TRUNCATE, which the stream carries. So new storage with a new
// column row asks the table to react (tables[].on_rewrite), new storage alone is accepted and
// recorded (CompareStorage).
//
// Partitions: replicated through its root (publish_via_partition_root), a partitioned table's
// row changes stream, but some partition maintenance changes the root's rows without any: ATTACH
// PARTITION of a table that holds rows (they were never inserted through the root), DETACH
// PARTITION and DROP of a partition (its rows leave without deletes), TRUNCATE of one partition
// (pgoutput publishes a TRUNCATE only for the root then), and a partition detached, changed and
// attached again (its pg_inherits row is new: the xmin of that row is the attach marker). A
// partition gone, one with new storage (the catalog cannot tell a TRUNCATE of a partition from a
// rewrite), one attached again, or a new partition that holds rows asks the table to react
// (tables[].on_partition_change); a new empty partition (the usual time partition made ahead of
// time) is accepted and recorded (Compare).
//
// Each table's storage is recorded (Record) as its sink content corresponds to it: under the
// snapshot of every backfill (RecordSnapshot, the base), and whenever the reader accepts a change.
// The reader compares the current catalog with it (Watcher.Check) at its start, at every RELATION
// message of the table (an ALTER ... TYPE invalidates the table's cache entry, so pgoutput sends
// one before the table's next change) and periodically. A table whose OID changed (dropped and
// re-created) is not a rewrite: its new storage is recorded without a reaction (the reader's
// identity check handles it).
//
// The records live in the pipeline's staging store: every worker that backfills a table or reads
// the stream reaches it, it outlives worker restarts and continue-as-new, and it keeps the
// partition lists (which grow with a table's partitions) out of workflow histories. The base
// and the reader's record are two documents, each with one writer; the reader's names the base
// it extends (its epoch), so a backfill that completes while the reader writes is never
// overwritten by a record of the older content.
package catalogwatch
