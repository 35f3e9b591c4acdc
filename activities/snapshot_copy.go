package activities

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"go.temporal.io/sdk/activity"

	"github.com/sluicecdc/sluice/backfill"
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/faults"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// CopySnapshotInput asks for (a slice of) the copy of a snapshot, in key order after After.
type CopySnapshotInput struct {
	Table    TableConfig  `json:"table"`
	Snapshot SnapshotInfo `json:"snapshot"`
	// After holds the key columns' text values of the last row copied; empty at the start.
	After []string `json:"after,omitempty"`
	// Ranges are the key ranges of a parallel copy with their cursors (the last call's result);
	// empty at the start and for a copy in one range (After).
	Ranges []backfill.RangeCursor `json:"ranges,omitempty"`
	// ChunkRows is the most rows per chunk (default 50000).
	ChunkRows int `json:"chunk_rows"`
	// ChunkBytes sizes chunks by bytes (backfill.CopyLimits.ChunkBytes); 0: by rows only.
	ChunkBytes int64 `json:"chunk_bytes,omitempty"`
	// Parallelism is how many key ranges the copy reads at once, each on a connection of its
	// own under the snapshot (default 1: one range, read ahead by one chunk).
	Parallelism int `json:"parallelism,omitempty"`
	// ApplyBytes groups chunks into one sink write up to this many bytes of Arrow records
	// (default 64 MiB).
	ApplyBytes int64 `json:"apply_bytes,omitempty"`
	// RunFor returns after this long (between two writes) with the cursor, so the workflow can
	// show progress and honour a pause; 0 copies to the end.
	RunFor time.Duration `json:"run_for,omitempty"`
}

// defaultApplyBytes is the sink write size of a backfill when the input sets none.
const defaultApplyBytes = 64 << 20

// CopySnapshot copies the snapshot's rows after in.After into the sink as snapshot batches (rows
// only, zero Hi), many chunks per activity: the run's history grows with the calls, not with the
// table. It heartbeats a backfill.Cursor after every chunk read and every write, and repeats the
// last one every few seconds while a read or a write takes long (the heartbeat timeout is
// seconds, so that a lost worker is noticed soon); a retried
// attempt (on this worker: the activity runs in the backfill's session) resumes from the last
// heartbeat's cursor, and re-applying rows is idempotent (upsert by key). It returns the cursor
// after RunFor or at the snapshot's end, with Rows and Chunks counting every attempt's writes.
// A worker that does not hold the snapshot returns SnapshotSessionLost (the run re-snapshots).
//
// A cancellation (the table paused: the workflow cancels the slice; seen at a heartbeat) ends
// the copy after the chunk it is reading: it writes what it read and returns that cursor as its
// result, so the workflow records the progress and resumes from it. Reads and writes are never
// cancelled mid-way (a query cancelled mid-read may close the snapshot's connection); only the
// attempt's deadline bounds them.
func (a *Backfill) CopySnapshot(ctx context.Context, in CopySnapshotInput) (_ backfill.Cursor, err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in.Table); err != nil {
		return backfill.Cursor{}, err
	}
	held, err := a.held(in.Snapshot.Name, in.Table.Table())
	if err != nil {
		return backfill.Cursor{}, err
	}
	schema := in.Table.Spec.Schema
	if len(in.After) != 0 && len(in.After) != len(schema.KeyIndexes()) {
		return backfill.Cursor{}, failure.Newf(failure.SourceSetup,
			"table %s: copy cursor has %d values for %d key columns", schema.Table, len(in.After), len(schema.KeyIndexes()))
	}
	from := backfill.Cursor{Last: in.After, Ranges: in.Ranges}
	if activity.HasHeartbeatDetails(ctx) {
		var hb backfill.Cursor
		if err := activity.GetHeartbeatDetails(ctx, &hb); err == nil {
			from = hb // the previous attempt's applied rows: resume after them
		}
	}
	if err := planRanges(ctx, held, schema, in.Parallelism, &from); err != nil {
		return backfill.Cursor{}, sourceError(fmt.Sprintf("splitting the snapshot of table %s into key ranges", schema.Table), err)
	}
	lim := backfill.CopyLimits{ChunkRows: in.ChunkRows, ChunkBytes: in.ChunkBytes, Parallel: in.Parallelism,
		ApplyBytes: in.ApplyBytes, RunFor: in.RunFor}
	if lim.ChunkRows <= 0 {
		lim.ChunkRows = 50_000
	}
	if lim.ApplyBytes <= 0 {
		lim.ApplyBytes = defaultApplyBytes
	}
	mem := a.allocator()
	work := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		work, cancel = context.WithDeadline(work, dl)
		defer cancel()
	}
	beat := startBeat(ctx, from, beatInterval, sendHeartbeat[backfill.Cursor])
	defer beat.stop()
	deps := backfill.CopyDeps{
		Read: func(ctx context.Context, after []string, limit int) (backfill.Chunk, error) {
			return held.ReadChunk(ctx, mem, schema, after, limit)
		},
		ReadAhead: func(ctx context.Context, after []string, limit int) {
			held.ReadAheadFrom(ctx, mem, schema, after, limit)
		},
		ReadRange: func(ctx context.Context, r source.KeyRange, after []string, limit int) (backfill.Chunk, error) {
			return held.ReadRange(ctx, mem, schema, r, after, limit)
		},
		Apply: func(ctx context.Context, rec arrow.RecordBatch) error {
			if err := a.applyRecord(ctx, in.Table, rec, batch.SourcePosition{}); err != nil {
				return err
			}
			a.Faults.Hit(faults.SnapshotAfterWrite, staging.BatchRef{Table: schema.Table})
			return nil
		},
		Heartbeat: func(_ context.Context, c backfill.Cursor) {
			c.Last = slices.Clone(c.Last) // the copy may reuse its slice; the repeats send this one
			beat.record(ctx, c)
		},
		Mem:  mem,
		Stop: ctx.Done(),
	}
	at, err := backfill.Copy(work, lim, deps, from)
	if err != nil {
		if failure.TypeOf(err) != "" {
			return at, err // rows that cannot be converted (backfill), or the sink's classification (commit.SinkError)
		}
		return at, sourceError(fmt.Sprintf("copying the snapshot of table %s", schema.Table), err)
	}
	return at, nil
}

// planRanges gives a copy that has not started its key ranges when parallelism allows it and
// the table splits (backfill.Session.SplitRanges), and opens the reading connections of a copy
// that has them. A copy that started in one range (a cursor with Last) stays in one range.
func planRanges(ctx context.Context, held *backfill.Session, schema batch.Schema, parallelism int, from *backfill.Cursor) error {
	if len(from.Ranges) > 0 {
		return held.OpenConns(ctx, max(parallelism, 1))
	}
	if parallelism < 2 || len(from.Last) > 0 || from.Done {
		return nil
	}
	ranges, err := held.SplitRanges(ctx, schema, parallelism)
	from.Ranges = ranges
	return err
}
