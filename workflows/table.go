package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

// Activity receivers: nil pointers whose method values name the activities (their registered
// names are the method names).
var (
	commitActs   *activities.Commit
	snapshotActs *activities.Snapshot
)

// table is the state of one TableWorkflow run. Only workflow code touches it.
type table struct {
	in          TableInput
	opts        TableOptions
	state       State
	position    batch.SourcePosition
	hasPosition bool
	queue       []staging.BatchRef
	paused      bool
	resync      bool
	rows        int64
	batches     int64
	runs        int
	commits     int // commits in this run
	lastError   string
	snapshot    *SnapshotProgress
	// sinceMaintenance counts batches that wrote rows since the last maintenance started.
	sinceMaintenance int
	lastMaintenance  *MaintenanceStatus
}

// TableWorkflow owns one table of a pipeline: it backfills the table when its sink holds no
// committed position, then commits the staged batches it is signalled, one at a time, in
// position order. A poison batch fails it with a non-retryable PoisonBatch error and the
// position stays before the batch; `resume` (signal-with-start) starts a new run from the sink's
// position and the staged files. A lost snapshot session fails the run with a retryable error:
// the next run discards the partial copy and snapshots again.
func TableWorkflow(ctx workflow.Context, in TableInput) error {
	t := &table{in: in, opts: in.Options.withDefaults()}
	if s := in.State; s != nil {
		t.position, t.hasPosition, t.queue, t.paused = s.Position, true, s.Queue, s.Paused
		t.rows, t.batches, t.runs = s.Rows, s.Batches, s.Runs
		t.sinceMaintenance, t.lastMaintenance = s.SinceMaintenance, s.LastMaintenance
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, t.status); err != nil {
		return fmt.Errorf("registering status query: %w", err)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		SearchPipeline.ValueSet(in.Pipeline), SearchTable.ValueSet(in.Table().String())); err != nil {
		return fmt.Errorf("upserting search attributes of table %s: %w", in.Table(), err)
	}
	if err := t.setState(ctx, StateStarting); err != nil {
		return err
	}
	signals := newTableSignals(ctx, t)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			signals.sel.Select(ctx)
		}
	})

	if err := t.load(ctx); err != nil {
		return t.fail(ctx, err)
	}
	for {
		if err := t.setState(ctx, t.streamState()); err != nil {
			return err
		}
		if err := workflow.Await(ctx, func() bool {
			return t.resync || t.continueAsNewDue(ctx) || (!t.paused && len(t.queue) > 0)
		}); err != nil {
			return err
		}
		switch {
		case t.resync:
			t.resync = false
			if err := t.backfill(ctx); err != nil {
				return t.fail(ctx, err)
			}
		case t.continueAsNewDue(ctx):
			signals.drain(ctx, t)
			if t.resync {
				continue // a resync came in: do it in this run
			}
			return workflow.NewContinueAsNewError(ctx, TableWorkflowType, t.next())
		default:
			if err := t.commitNext(ctx); err != nil {
				return t.fail(ctx, err)
			}
			if t.maintenanceDue() {
				if err := t.maintain(ctx); err != nil {
					return err
				}
			}
		}
	}
}

func (t *table) streamState() State {
	if t.paused {
		return StatePaused
	}
	return StateStream
}

// load reads where the table stands (sink position, staged batches), ensures its target and
// backfills it when the sink holds no position.
func (t *table) load(ctx workflow.Context) error {
	actx := workflow.WithActivityOptions(ctx, shortActivity())
	if len(t.in.Spec.Schema.Columns) == 0 {
		// Started by hand without the columns (the SourceWorkflow passes them): read them.
		if err := workflow.ExecuteActivity(actx, setupActs.TableSchema, t.in.TableConfig).Get(ctx, &t.in.Spec.Schema); err != nil {
			return err
		}
	}
	if err := workflow.ExecuteActivity(actx, commitActs.EnsureTable, t.in.TableConfig).Get(ctx, nil); err != nil {
		return err
	}
	var res activities.LoadTableResult
	if err := workflow.ExecuteActivity(actx, commitActs.LoadTable, t.in.TableConfig).Get(ctx, &res); err != nil {
		return err
	}
	for _, r := range res.Staged {
		t.queue = enqueue(t.queue, r)
	}
	if !res.HasPosition {
		return t.backfill(ctx)
	}
	// The sink, not a carried state, says where the table stands.
	t.position, t.hasPosition = res.Position, true
	return nil
}

// commitNext commits the queue's first batch.
func (t *table) commitNext(ctx workflow.Context) error {
	ref := t.queue[0]
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: t.opts.CommitTimeout,
		HeartbeatTimeout:    t.opts.CommitHeartbeat,
		RetryPolicy:         RetryForever(),
	})
	var res activities.CommitBatchResult
	err := workflow.ExecuteActivity(actx, commitActs.CommitBatch, activities.CommitBatchInput{Table: t.in.TableConfig, Ref: ref}).Get(ctx, &res)
	if err != nil {
		return err
	}
	// Refs signalled while the commit ran were inserted in order; the committed one is still
	// the one with ref's URI.
	for i, r := range t.queue {
		if r.URI == ref.URI {
			t.queue = append(t.queue[:i:i], t.queue[i+1:]...)
			break
		}
	}
	if res.Schema != nil {
		// The source table changed (ADD COLUMN) and CommitBatch evolved the target.
		t.in.Spec.Schema = *res.Schema
	}
	t.position, t.hasPosition = maxPosition(t.position, res.Position), true
	t.rows += res.Rows
	t.batches++
	if res.Rows > 0 {
		t.sinceMaintenance++
	}
	t.commits++
	t.lastError = ""
	return nil
}

// continueAsNewDue reports whether this run has done enough to hand over to a new run. A
// backfill is never interrupted by it: its session belongs to this run.
func (t *table) continueAsNewDue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return t.commits >= t.opts.MaxCommitsPerRun ||
		info.GetCurrentHistoryLength() >= t.opts.MaxHistoryEvents ||
		info.GetContinueAsNewSuggested()
}

// next is the input of the run this one continues as.
func (t *table) next() TableInput {
	next := t.in
	next.State = &TableState{
		Position: t.position, Queue: t.queue, Paused: t.paused,
		Rows: t.rows, Batches: t.batches, Runs: t.runs + 1,
		SinceMaintenance: t.sinceMaintenance, LastMaintenance: t.lastMaintenance,
	}
	return next
}

// fail records err and turns it into the run's failure. Non-retryable activity failures
// (PoisonBatch, SourceMismatch, ...) fail the workflow with the same type and message, not
// retried, so the table stops until the operator acts; anything else fails the run retryably.
func (t *table) fail(ctx workflow.Context, err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NonRetryable() {
		t.lastError = appErr.Message()
		_ = t.setState(ctx, StateFailed)
		return temporal.NewNonRetryableApplicationError(appErr.Message(), appErr.Type(), nil)
	}
	t.lastError = err.Error()
	_ = t.setState(ctx, StateFailed)
	return err
}

// setState records the state and upserts the SluicePhase search attribute when it changed.
func (t *table) setState(ctx workflow.Context, state State) error {
	if state == t.state {
		return nil
	}
	t.state = state
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchPhase.ValueSet(string(state))); err != nil {
		return fmt.Errorf("upserting search attributes of table %s: %w", t.in.Table(), err)
	}
	return nil
}

// status answers the status query.
func (t *table) status() (TableStatus, error) {
	return TableStatus{
		Pipeline: t.in.Pipeline, Table: t.in.Table().String(), Phase: t.state,
		Position: t.position, HasPosition: t.hasPosition, Rows: t.rows, Batches: t.batches,
		QueueLength: len(t.queue), LagBytes: lagBytes(t.queue, t.position), OldestQueuedCommit: oldestCommit(t.queue), Paused: t.paused,
		LastError: t.lastError, Snapshot: t.snapshot, LastMaintenance: t.lastMaintenance,
	}, nil
}

// shortActivity is the options of quick sink-side activities: retried forever, visibly.
func shortActivity() workflow.ActivityOptions {
	return workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Minute, RetryPolicy: RetryForever()}
}
