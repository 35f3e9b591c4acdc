package sinks

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicecdc/sluice/batch"
)

// MetadataColumn materializes one context column (__op, __pos, __commit_ts, __ingest_ts,
// __snapshot, __phase, named without the underscores in From) under the name As.
type MetadataColumn struct {
	From string `json:"from"`
	As   string `json:"as"`
}

// TableSpec is what a sink needs to know to create and write one target table.
type TableSpec struct {
	Target   string           `json:"target"`   // sink-specific name, e.g. raw.orders
	Schema   batch.Schema     `json:"schema"`   // the source table's columns; Key marks the key
	Metadata []MetadataColumn `json:"metadata"` // the context columns to materialize, in order
}

// Batch is one collapsed batch of one table, ready to apply. Record holds the table's columns in
// Schema order followed by the context columns (batch's context tail); each key appears at most
// once, and rows whose __op is delete carry the key (other columns null).
type Batch struct {
	Spec   TableSpec
	Phase  batch.Phase
	Record arrow.RecordBatch
	Lo, Hi batch.SourcePosition // the batch's watermark; Hi is committed with the data
}

// Sink is one destination. Implementations are safe for concurrent use by different tables;
// calls for one table are never concurrent (the table's workflow runs one commit at a time).
// Every method honours ctx cancellation and returns errors classified with Poison (stop) or left
// unmarked (transient, retried).
//
// Guards: between the caller's reading of Position and Apply's write, another attempt of the same
// batch or of a later one may commit (an activity attempt that outlived its heartbeat timeout runs
// on while its retry commits). A guard is the check, inside Apply and on the position the write
// is made atomic with, that keeps such a stale Apply from moving the position back or overwriting
// newer rows. A guard never re-implements the rule: it calls batch.Covered, and skips the batch
// when the answer is batch.CoverAll. The built-in sinks and why each needs one:
//
//   - Iceberg: its commit is optimistic, pinned to the branch head of the table Apply loaded; the
//     guard re-checks the position of that loaded table, so check and commit are one atomic step
//     and a replay never moves the position back.
//   - ClickHouse: a commit is one insert with no compare-and-swap, and among rows of equal
//     version (a transaction cut into several batches) the last insert wins; the guard reads the
//     position before the insert, so a replayed earlier batch does not overwrite a later one's
//     rows.
//   - Couchbase: documents are written before the checkpoint, which is written by compare-and-
//     swap; the guard decides from the checkpoint read for that swap, and also trims a partly
//     covered batch (batch.DropCovered). Each document (and each deleted key's tombstone) also
//     carries its row's position and is written by compare-and-swap only over an older one, so
//     an attempt overtaken after its guard cannot write an older image either.
//
// A sink whose commit rejects a stale write by itself needs none.
type Sink interface {
	// EnsureTable creates the target table for spec when it does not exist, and evolves it for
	// added columns. A change it cannot apply (a type change, a dropped key column) is poison.
	// It is idempotent.
	EnsureTable(ctx context.Context, spec TableSpec) error

	// Position returns the committed position of the target table, read from the destination
	// itself; ok is false when the table holds no committed position (backfill needed).
	Position(ctx context.Context, spec TableSpec) (pos batch.SourcePosition, ok bool, err error)

	// Apply writes b's rows (upserts and deletes by key) and b.Hi as the committed position in one
	// atomic destination commit: after a crash either both are visible or neither. Writes are
	// idempotent by key: re-applying a batch leaves the same visible rows. The watermark rule is
	// the caller's: CommitBatch reads Position once and asks batch.Covered, skips a covered batch
	// and trims a partly covered one (batch.DropCovered) before calling Apply. A sink whose
	// atomicity leaves a replay a way to undo a later commit keeps a guard (see Sink). The
	// backfill's snapshot chunks and snapshot end reach Apply without the caller's check; for
	// them only the guard applies the rule.
	//
	// Two special cases serve the backfill. A batch whose Hi position is zero (a snapshot chunk)
	// writes its rows and leaves the committed position as it was, so a table shows a position
	// only once its whole snapshot is in. A batch with no rows and a non-zero Hi (the end of a
	// snapshot) commits Hi alone. Snapshot-phase rows may meet keys already present (an earlier
	// attempt's chunk): they upsert, never duplicate.
	Apply(ctx context.Context, b Batch) error

	// DiscardSnapshot removes every row and the position of a partially applied snapshot, leaving
	// the target empty and without a position. It is idempotent.
	DiscardSnapshot(ctx context.Context, spec TableSpec) error

	// Close releases connections. The sink must not be used after Close.
	Close(ctx context.Context) error
}

// Maintainer is a Sink whose tables need housekeeping that committing one batch at a time makes
// necessary: compacting small data and delete files, rewriting manifests, expiring old snapshots
// or versions. The table's workflow calls it between commits (every N committed batches), never
// concurrently with Apply, DiscardSnapshot or another Maintain of the same table; other tables'
// calls may run concurrently. Sinks without such needs do not implement it.
type Maintainer interface {
	// Maintain tidies the target table of spec and says what it did. It never changes the
	// visible rows and keeps Position answering the same committed position. It is idempotent
	// and may stop at any point (ctx cancelled, worker lost) without harm: what it finished
	// stays done, the rest is done by the next call. Failures are classified like every sink
	// error: poison (retrying cannot help) or unmarked (transient).
	Maintain(ctx context.Context, spec TableSpec) (MaintenanceReport, error)
}

// MaintenanceReport counts what one Maintain call did, by snake_case names a sink chooses
// (removed_data_files, expired_snapshots, ...). Empty when there was nothing to do.
type MaintenanceReport map[string]int64
