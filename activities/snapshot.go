package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// Snapshot holds the backfill activities. BeginSnapshot, CopyChunk and EndSnapshot run in one
// Temporal session, on the worker that holds the exported snapshot's connection; losing that
// worker loses the snapshot, so the TableWorkflow run fails and its next run discards the
// partial copy (DiscardSnapshot) and starts again.
//
// Contract with the sinks: chunks are applied with Phase snapshot and a zero Hi, which writes
// rows without moving the committed position; EndSnapshot commits the snapshot's position. So a
// table shows a position only once its snapshot is complete, and a table without one is
// backfilled from scratch.
type Snapshot struct {
	Sinks SinkProvider
}

// SnapshotInfo describes an exported snapshot.
type SnapshotInfo struct {
	// Name is the exported snapshot's name (SET TRANSACTION SNAPSHOT takes it).
	Name string `json:"name"`
	// Position is the snapshot's consistent point in the pipeline's stream: changes at or below it
	// are in the snapshot; it becomes the table's committed position when the copy completes.
	Position batch.SourcePosition `json:"position"`
	// EstimatedRows is the planner's estimate of the table's rows (progress display only).
	EstimatedRows int64 `json:"estimated_rows"`
}

// BeginSnapshotInput names the table to snapshot.
type BeginSnapshotInput struct {
	Table TableConfig `json:"table"`
}

// BeginSnapshot exports a snapshot consistent with the pipeline's slot and keeps its connection
// open on this worker for the session's CopyChunk and EndSnapshot.
//
// Not implemented yet: it needs package source's exported snapshot.
func (a *Snapshot) BeginSnapshot(_ context.Context, _ BeginSnapshotInput) (SnapshotInfo, error) {
	return SnapshotInfo{}, notImplemented("BeginSnapshot", "source (exported snapshot)")
}

// CopyChunkInput asks for the next chunk of a snapshot, in primary key order after After.
type CopyChunkInput struct {
	Table    TableConfig  `json:"table"`
	Snapshot SnapshotInfo `json:"snapshot"`
	// After holds the key columns' text values of the last row copied; empty for the first chunk.
	After   []string `json:"after,omitempty"`
	MaxRows int      `json:"max_rows"`
}

// CopyChunkResult reports one copied chunk.
type CopyChunkResult struct {
	Rows int64    `json:"rows"`
	Last []string `json:"last,omitempty"` // key of the last row copied: the next chunk's After
	Done bool     `json:"done"`           // no rows after Last
}

// CopyChunk reads one keyset-paginated chunk under the snapshot and applies it to the sink as a
// snapshot batch (rows only, zero Hi). Re-applying a chunk is idempotent (upsert by key).
//
// Not implemented yet: it needs package source's snapshot reader.
func (a *Snapshot) CopyChunk(_ context.Context, _ CopyChunkInput) (CopyChunkResult, error) {
	return CopyChunkResult{}, notImplemented("CopyChunk", "source (snapshot reader)")
}

// EndSnapshotInput names the snapshot to finish.
type EndSnapshotInput struct {
	Table    TableConfig  `json:"table"`
	Snapshot SnapshotInfo `json:"snapshot"`
}

// EndSnapshot commits the snapshot's position to the sink (the table is now backfilled) and
// releases the snapshot's connection.
//
// Not implemented yet: it needs package source to release the exported snapshot.
func (a *Snapshot) EndSnapshot(_ context.Context, _ EndSnapshotInput) error {
	return notImplemented("EndSnapshot", "source (exported snapshot)")
}

// DiscardSnapshot removes a partially applied snapshot: every row and the position of the
// table's target. A backfill starts with it, so a copy interrupted by a lost session is never
// trusted. It is idempotent.
func (a *Snapshot) DiscardSnapshot(ctx context.Context, in TableConfig) error {
	sink, err := a.Sinks.Sink(ctx, in.Sink)
	if err != nil {
		return fmt.Errorf("opening sink %s for table %s: %w", in.Sink.Name, in.Table(), err)
	}
	if err := sink.DiscardSnapshot(ctx, in.Spec); err != nil {
		if sinks.IsPoison(err) {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("table %s: sink %s cannot discard the partial snapshot in %s: %v", in.Table(), in.Sink.Name, in.Spec.Target, err),
				ErrTypePoisonBatch, err)
		}
		return fmt.Errorf("discarding partial snapshot of table %s: %w", in.Table(), err)
	}
	return nil
}
