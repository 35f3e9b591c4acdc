package activities

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.temporal.io/sdk/activity"

	"github.com/sluicecdc/sluice/commit"
	"github.com/sluicecdc/sluice/internal/faults"
	"github.com/sluicecdc/sluice/metrics"
	"github.com/sluicecdc/sluice/staging"
)

// Commit holds the sink-side activities of a table: EnsureTable, LoadTable, NextBatches,
// CommitBatch and MaintainTable. They run the commit engine (package commit).
type Commit struct {
	Sinks   SinkProvider
	Staging *staging.Store
	// Mem allocates the decoded batches; nil means memory.DefaultAllocator.
	Mem memory.Allocator
	// HeartbeatEvery is how often a running commit heartbeats; 0 means 5 seconds. The workflow's
	// heartbeat timeout must be a few times longer.
	HeartbeatEvery time.Duration
	// Faults are the testing hooks of SLUICE_FAULTS (package internal/faults); nil in production.
	Faults *faults.Points
	// Metrics records commits, positions and maintenance runs; nil records nothing.
	Metrics *metrics.Metrics
	// Authority is the worker's config that every input is checked against; nil refuses all.
	Authority *Authority
}

// engine is the commit engine over the activities' staging store, allocator, faults and metrics.
func (a *Commit) engine() *commit.Engine {
	return &commit.Engine{Staging: a.Staging, Mem: a.Mem, Faults: a.Faults, Metrics: a.Metrics}
}

// EnsureTable creates or evolves the table's target in its sink. It is idempotent. A target
// that holds a position of another source than in.Source is left as it is: a non-retryable
// SourceMismatch error.
func (a *Commit) EnsureTable(ctx context.Context, in TableConfig) (err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in); err != nil {
		return err
	}
	sink, err := a.Sinks.Sink(ctx, in.Sink)
	if err != nil {
		return fmt.Errorf("opening sink %s for table %s: %w", in.Sink.Name, in.Table(), err)
	}
	t := in
	if _, _, err := commit.StoredPosition(ctx, sink, t); err != nil {
		return err
	}
	return commit.SinkError(t, "creating or evolving target", sink.EnsureTable(ctx, in.Spec))
}

// CommitBatchInput names the batches to commit and their table: one (Ref), or several
// consecutive ones (Refs) that CommitBatch commits together in one sink commit.
type CommitBatchInput struct {
	Table TableConfig `json:"table"`
	// Ref is the one batch to commit when Refs is empty (the only form of histories recorded
	// before grouped commits).
	Ref staging.BatchRef `json:"ref,omitzero"`
	// Refs are staged batches of the table in commit order (staging.Compare), all of one phase:
	// a TableWorkflow catching up a backlog commits a window's consecutive batches at once. When
	// set, they are what is committed; the TableWorkflow also sets Ref to the first of them, so a
	// worker of an earlier version commits that one alone.
	Refs []staging.BatchRef `json:"refs,omitempty"`
}

// batches returns the refs to commit: Refs, or Ref alone.
func (in CommitBatchInput) batches() []staging.BatchRef {
	if len(in.Refs) > 0 {
		return in.Refs
	}
	return []staging.BatchRef{in.Ref}
}

// CommitBatchResult says what a commit did (commit.Result).
type CommitBatchResult = commit.Result

// CommitBatch commits staged batches (one, or several consecutive ones) to the table's sink in
// one atomic sink commit, idempotently by watermark (commit.Engine.Commit), heartbeating while it
// runs. Running it again after any crash is safe. A poison batch becomes a non-retryable
// PoisonBatch error naming the table, the range (first lo..last hi), the files and the cause;
// the engine's other marked failures (SourceMismatch, StagedBatchMissing, InvalidBatchRef) are
// non-retryable too; other failures are transient.
func (a *Commit) CommitBatch(ctx context.Context, in CommitBatchInput) (_ CommitBatchResult, err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in.Table); err != nil {
		return CommitBatchResult{}, err
	}
	refs := in.batches()
	stop := a.heartbeat(ctx, fmt.Sprintf("%s..%s", refs[0].Lo.Position, refs[len(refs)-1].Hi.Position))
	defer stop()
	sink, err := a.Sinks.Sink(ctx, in.Table.Sink)
	if err != nil {
		return CommitBatchResult{}, fmt.Errorf("opening sink %s for table %s: %w", in.Table.Sink.Name, in.Table.Table(), err)
	}
	return a.engine().Commit(ctx, sink, in.Table, refs, activity.GetLogger(ctx))
}

// heartbeat records detail as a heartbeat now and every HeartbeatEvery until the returned stop
// is called, so a worker that dies mid-commit is noticed after the heartbeat timeout, not the
// whole start-to-close timeout.
func (a *Commit) heartbeat(ctx context.Context, detail string) (stop func()) {
	every := a.HeartbeatEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	activity.RecordHeartbeat(ctx, detail)
	return beatEvery(ctx, every, func() bool {
		activity.RecordHeartbeat(ctx, detail)
		return true
	})
}
