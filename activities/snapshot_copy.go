package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/backfill"
	"github.com/sluicecdc/sluice/batch"
)

// CopySnapshotInput asks for (a slice of) the copy of a snapshot, in key order after After.
type CopySnapshotInput struct {
	Table    TableConfig  `json:"table"`
	Snapshot SnapshotInfo `json:"snapshot"`
	// After holds the key columns' text values of the last row copied; empty at the start.
	After []string `json:"after,omitempty"`
	// ChunkRows is the rows per SELECT (default 50000).
	ChunkRows int `json:"chunk_rows"`
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
func (a *Snapshot) CopySnapshot(ctx context.Context, in CopySnapshotInput) (backfill.Cursor, error) {
	held, err := a.held(in.Snapshot.Name, in.Table.Table())
	if err != nil {
		return backfill.Cursor{}, err
	}
	schema := in.Table.Spec.Schema
	if len(in.After) != 0 && len(in.After) != len(schema.KeyIndexes()) {
		return backfill.Cursor{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("table %s: copy cursor has %d values for %d key columns", schema.Table, len(in.After), len(schema.KeyIndexes())),
			ErrTypeSourceSetup, nil)
	}
	from := backfill.Cursor{Last: in.After}
	if activity.HasHeartbeatDetails(ctx) {
		var hb backfill.Cursor
		if err := activity.GetHeartbeatDetails(ctx, &hb); err == nil {
			from = hb // the previous attempt's applied rows: resume after them
		}
	}
	lim := backfill.CopyLimits{ChunkRows: in.ChunkRows, ApplyBytes: in.ApplyBytes, RunFor: in.RunFor}
	if lim.ChunkRows <= 0 {
		lim.ChunkRows = 50_000
	}
	if lim.ApplyBytes <= 0 {
		lim.ApplyBytes = defaultApplyBytes
	}
	mem := a.allocator()
	beat := startBeat(ctx, from, beatEvery, sendHeartbeat[backfill.Cursor])
	defer beat.stop()
	deps := backfill.CopyDeps{
		Read: func(ctx context.Context, after []string, limit int) (backfill.Chunk, error) {
			return held.ReadChunk(ctx, mem, schema, after, limit)
		},
		ReadAhead: func(ctx context.Context, after []string, limit int) {
			held.ReadAheadFrom(ctx, mem, schema, after, limit)
		},
		Apply: func(ctx context.Context, rec arrow.RecordBatch) error {
			return a.applyRecord(ctx, in.Table, rec, batch.SourcePosition{})
		},
		Heartbeat: func(ctx context.Context, c backfill.Cursor) {
			c.Last = slices.Clone(c.Last) // the copy may reuse its slice; the repeats send this one
			beat.record(ctx, c)
		},
		Mem: mem,
	}
	at, err := backfill.Copy(ctx, lim, deps, from)
	if be, ok := errors.AsType[*backfill.BuildError](err); ok {
		return at, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("table %s: snapshot rows cannot be converted: %v", schema.Table, be.Err), ErrTypePoisonBatch, be.Err)
	}
	if err != nil {
		if _, isApp := errors.AsType[*temporal.ApplicationError](err); isApp {
			return at, err // the sink's classification (sinkError)
		}
		return at, sourceError(fmt.Sprintf("copying the snapshot of table %s", schema.Table), err)
	}
	return at, nil
}

// beatEvery is how often a backfill activity repeats its last heartbeat details.
const beatEvery = 2 * time.Second

// repeatedBeat heartbeats the last recorded details of a copy every beatEvery until stop, so a
// sink write or a chunk read longer than the heartbeat timeout does not time the attempt out.
// It repeats only details the activity recorded (or those it started from): a retried attempt
// resumes from what was applied.
type repeatedBeat[T any] struct {
	send func(context.Context, T) // activity.RecordHeartbeat
	mu   sync.Mutex
	last T
	done chan struct{}
	wg   sync.WaitGroup
}

// startBeat starts sending from (until record reports other details) every every.
func startBeat[T any](ctx context.Context, from T, every time.Duration, send func(context.Context, T)) *repeatedBeat[T] {
	b := &repeatedBeat[T]{send: send, last: from, done: make(chan struct{})}
	b.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				b.mu.Lock()
				b.send(ctx, b.last)
				b.mu.Unlock()
			}
		}
	})
	return b
}

// record heartbeats v now and keeps repeating it. v must not change afterwards (clone a slice the
// activity reuses).
func (b *repeatedBeat[T]) record(ctx context.Context, v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = v
	b.send(ctx, v)
}

func (b *repeatedBeat[T]) stop() {
	close(b.done)
	b.wg.Wait()
}

// sendHeartbeat records v as the activity's heartbeat.
func sendHeartbeat[T any](ctx context.Context, v T) { activity.RecordHeartbeat(ctx, v) }
