// Package commit is the commit engine of a table: it commits staged batches to the table's sink
// idempotently by watermark. It reads the sink's committed position, decides how much of each
// batch it covers (batch.Covered), trims what is partly covered (batch.DropCovered),
// concatenates and collapses the rows left, evolves the target when the batches were read with
// other columns, applies them in one sink commit and acknowledges the staged files.
//
// The package knows nothing of Temporal. Package activities runs it as the CommitBatch activity
// (and uses its position and window reads in EnsureTable, LoadTable and NextBatches): it checks
// the input against the worker's config, opens the sink, heartbeats, and turns the failures the
// engine marks permanent (package failure: PoisonBatch, SourceMismatch, StagedBatchMissing,
// PositionGap, InvalidBatchRef) into non-retryable Temporal errors. Unmarked errors are
// transient: the activity is retried, and running the engine again after any crash is safe.
package commit
