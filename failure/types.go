package failure

// The types of the failures retrying cannot fix: the Temporal error types of the non-retryable
// errors the activities return and the workflows fail with. Workflows match on them, and they
// are recorded in workflow histories: their values never change.
const (
	// PoisonBatch: the sink cannot write a batch (unknown column, failed cast, constraint) or
	// the staged file cannot be decoded. The table stops at its committed position until an
	// operator fixes the cause and resumes.
	PoisonBatch = "PoisonBatch"
	// SourceMismatch: a batch or a stored position belongs to another source (system id,
	// timeline or slot) than the one it is compared with; their order is undefined.
	SourceMismatch = "SourceMismatch"
	// StagedBatchMissing: a batch that the sink does not hold is no longer staged.
	StagedBatchMissing = "StagedBatchMissing"
	// SourceSetup: the source cannot serve the pipeline as configured (wal_level, a missing
	// table or key, an unsupported column type, privileges). Fix the source or the config, then
	// restart the pipeline.
	SourceSetup = "SourceSetup"
	// SnapshotSessionLost: the worker holding the table's exported snapshot is gone (it
	// restarted, or the session to it was lost). A snapshot activity that lands on a worker not
	// holding the snapshot returns it non-retryable; the TableWorkflow then fails its run with
	// the same type, retryably, and the next run discards the partial snapshot and starts again.
	SnapshotSessionLost = "SnapshotSessionLost"
	// InvalidBatchRef: CommitBatch was given a batch of another pipeline or table than the one
	// it commits to; a bug in the caller, never retried.
	InvalidBatchRef = "InvalidBatchRef"
	// MaintenanceFailed: the sink's table maintenance hit a failure retrying cannot fix. The
	// table goes on committing; the workflow reports it in its status.
	MaintenanceFailed = "MaintenanceFailed"
	// SlotLost: the pipeline's replication slot was dropped or invalidated
	// (max_slot_wal_keep_size); the SourceWorkflow fails and is not retried. Every table may
	// have missed changes: tear down, start, and resync every table.
	SlotLost = "SlotLost"
	// PositionGap: a table's committed position is older than the pipeline's slot (the slot was
	// created again after the table last committed), so the slot cannot deliver the changes in
	// between. The table stops before writing anything; resync it.
	PositionGap = "PositionGap"
	// NotConfigured: an activity input names a pipeline, slot, publication, table, target or
	// sink that the worker's config does not hold. Whoever can start workflows on the task
	// queue must not steer the worker to other tables, targets or slots than its config names,
	// so the input is refused, never retried; the message names what was refused. Start the
	// pipeline from the config (`sluice start`), or change the workers' config and restart them.
	NotConfigured = "NotConfigured"
	// TableRemoved: a table's own activity (a TableWorkflow's) names a table of the worker's
	// pipeline that its config no longer lists: the table was removed from tables[] and the
	// workers restarted with the new file. Never retried; the TableWorkflow ends cleanly (not
	// failed), its staged batches and its hold on the slot stay until `sluice remove --table`,
	// and adding the table back and running `sluice start` starts it again. The SourceWorkflow's
	// activities refuse such a table as NotConfigured.
	TableRemoved = "TableRemoved"
	// PartitionChanged: a table with on_partition_change: stop saw its partitions change
	// (package catalogwatch); it fails until the operator resyncs it.
	PartitionChanged = "PartitionChanged"
	// TableRewritten: a table with on_rewrite: stop had its storage rewritten with a change of a
	// column (ALTER COLUMN ... TYPE to the same type with USING, or a widening that rewrites):
	// Postgres rewrote the existing rows' values without writing them to the WAL (package
	// partitions). It fails until the operator resyncs it; a resume is refused.
	TableRewritten = "TableRewritten"
	// SchemaChanged: a table fails after a schema change the stream cannot carry into the sink:
	// a column renamed in place, or retyped in a way that changed the values Postgres holds
	// (text → int). The remedy is a resync.
	SchemaChanged = "SchemaChanged"
	// IdentityChanged: a table's replica identity no longer carries its key. Unlike
	// SchemaChanged, the rows are still exact: the remedy is to set the identity back and resume.
	IdentityChanged = "ReplicaIdentityChanged"
	// TableRecreated: a table's relation OID is not the one the sink's content corresponds to:
	// it was dropped and created again under the same name (or dropped). The new table's rows
	// never streamed: the remedy is a resync (tables[].on_recreate: resync does it by itself).
	TableRecreated = "TableRecreated"
	// PublicationChanged: the pipeline's publication stopped carrying some of a table's changes
	// for a while: the table left the publication (ALTER PUBLICATION ... DROP TABLE) and came
	// back, or the publication was altered (publish flags, publish_via_partition_root). What
	// changed meanwhile never streamed: the remedy is a resync (tables[].on_recreate: resync).
	PublicationChanged = "PublicationChanged"
)
