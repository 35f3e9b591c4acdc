package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/staging"
)

// Activity receivers: nil pointers whose method values name the activities (their registered
// names are the method names).
var (
	commitActs   *activities.Commit
	backfillActs *activities.Backfill
)

// table is the state of one TableWorkflow run. Only workflow code touches it.
type table struct {
	in          TableInput
	opts        TableOptions
	state       State
	position    batch.SourcePosition
	hasPosition bool
	// window is the next staged batches in commit order, at most WindowRefs: no staged batch the
	// table needs sorts before its last one without being in it. beyond counts the batches known
	// to be staged after it (0: the window holds every one known); the workflow lists the next
	// window from staging (NextBatches) when the window is empty and beyond is not.
	window    []staging.BatchRef
	beyond    int
	stagedHi  batch.SourcePosition // the highest hi signalled or listed, for the lag
	paused    bool
	resync    bool
	stop      *StopRequest // SignalStop: fail the run with it
	epoch     string       // the snapshot of this run's last backfill (catalogwatch.Epoch)
	rows      int64
	batches   int64
	runs      int
	commits   int // commits in this run
	isolate   int // batches to commit alone: a poison group's, to commit up to its poison batch
	lastError string
	failures  int // consecutive failures of a stream-phase activity (an outage)
	progress  *BackfillProgress
	// sinceMaintenance counts batches that wrote rows since the last maintenance started.
	sinceMaintenance int
	lastMaintenance  *MaintenanceStatus
}

// TableWorkflow owns one table of a pipeline: it backfills the table when its sink holds no
// committed position, then commits the staged batches it is signalled in position order, the
// window's first consecutive batches grouped into one CommitBatch. A poison batch fails it with a
// non-retryable PoisonBatch error and the position stays before the batch; `resume`
// (signal-with-start) starts a new run from the sink's position and the staged files. A lost snapshot session fails the run with a retryable error:
// the next run discards the partial copy and snapshots again.
func TableWorkflow(ctx workflow.Context, in TableInput) error {
	t := &table{in: in, opts: in.Options.withDefaults()}
	// Runs recorded before grouped commits committed one batch at a time; replaying them must.
	if workflow.GetVersion(ctx, "grouped-commits", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		t.opts.CommitGroupRefs = 1
	}
	if s := in.State; s != nil {
		t.position, t.hasPosition, t.paused = s.Position, true, s.Paused
		t.rows, t.batches, t.runs = s.Rows, s.Batches, s.Runs
		t.sinceMaintenance, t.lastMaintenance = s.SinceMaintenance, s.LastMaintenance
		t.lastError, t.failures = s.LastError, s.Failures
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

	if err := t.load(ctx); err != nil && !errors.Is(err, errInterrupted) {
		return t.fail(ctx, err)
	}
	for {
		if err := t.setState(ctx, t.streamState()); err != nil {
			return err
		}
		t.showDetails(ctx)
		if err := workflow.Await(ctx, func() bool {
			return t.resync || t.stop != nil || t.continueAsNewDue(ctx) || (!t.paused && (len(t.window) > 0 || t.beyond > 0))
		}); err != nil {
			return err
		}
		switch {
		case t.resync:
			t.resync = false
			if err := t.backfillRetrying(ctx); err != nil {
				return t.fail(ctx, err)
			}
		case t.stop != nil:
			if t.epoch != "" && t.stop.Epoch != "" && t.stop.Epoch != t.epoch {
				t.stop = nil // meant for the content this run's backfill replaced
				continue
			}
			return t.fail(ctx, temporal.NewNonRetryableApplicationError(t.stop.Message, t.stop.Type, nil))
		case t.continueAsNewDue(ctx):
			signals.drain(ctx, t)
			if t.resync || t.stop != nil {
				continue // a resync or stop came in: do it in this run
			}
			return workflow.NewContinueAsNewError(ctx, TableWorkflowType, t.next())
		case len(t.window) == 0:
			if err := t.retry(ctx, "listing staged batches", true, t.listNext); err != nil && !errors.Is(err, errInterrupted) {
				return t.fail(ctx, err)
			}
		default:
			if err := t.retry(ctx, "committing from batch "+t.window[0].Range(), true, t.commitNext); err != nil {
				if errors.Is(err, errInterrupted) {
					continue
				}
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

// load reads where the table stands (sink position, first window of staged batches), ensures
// its target and backfills it when the sink holds no position. Each step retries within the
// run's budget (retry); errInterrupted means the run must continue as new first.
func (t *table) load(ctx workflow.Context) error {
	if len(t.in.Spec.Schema.Columns) == 0 {
		// Started by hand without the columns (the SourceWorkflow passes them): read them.
		if err := t.retry(ctx, "reading the table's schema", false, func(ctx workflow.Context) error {
			return t.exec(ctx, summarized(streamActivity(), "read the columns of "+t.in.Table().String()), setupActs.TableSchema, t.in.TableConfig, &t.in.Spec.Schema)
		}); err != nil {
			return err
		}
	}
	if err := t.retry(ctx, "ensuring the target", false, func(ctx workflow.Context) error {
		return t.exec(ctx, summarized(streamActivity(), "ensure target "+t.in.Spec.Target), commitActs.EnsureTable, t.in.TableConfig, nil)
	}); err != nil {
		return err
	}
	var res activities.LoadTableResult
	in := activities.LoadTableInput{TableConfig: t.in.TableConfig, Window: windowLimit()}
	if err := t.retry(ctx, "loading the table", false, func(ctx workflow.Context) error {
		t.window, t.beyond = nil, 0
		err := t.exec(ctx, summarized(streamActivity(), "load the position of "+t.in.Spec.Target+" and the staged batches"), commitActs.LoadTable, in, &res)
		if err != nil {
			t.forgetWindow()
		}
		return err
	}); err != nil {
		return err
	}
	t.mergeWindow(res.Staged, res.More, res.StagedHi)
	if !res.HasPosition {
		return t.backfillRetrying(ctx)
	}
	// The sink, not a carried state, says where the table stands.
	t.position, t.hasPosition = res.Position, true
	return nil
}

// commitNext commits the window's first batches, grouped (nextGroup) into one CommitBatch.
func (t *table) commitNext(ctx workflow.Context) error {
	g := t.nextGroup()
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: t.opts.CommitTimeout,
		HeartbeatTimeout:    t.opts.CommitHeartbeat,
		RetryPolicy:         boundedRetry(),
		Summary:             commitSummary(g),
	}
	// Ref is the group's first batch even when Refs is set: a worker of an earlier version reads
	// only Ref, commits that one and says nothing of Refs, which counts as one.
	in := activities.CommitBatchInput{Table: t.in.TableConfig, Ref: g[0]}
	if len(g) > 1 {
		in.Refs = g
	}
	var res activities.CommitBatchResult
	if err := t.exec(ctx, opts, commitActs.CommitBatch, in, &res); err != nil {
		var appErr *temporal.ApplicationError
		if len(g) > 1 && errors.As(err, &appErr) && appErr.Type() == failure.PoisonBatch {
			t.isolate = len(g)
			workflow.GetLogger(ctx).Warn("a group of batches is poison; committing them one at a time",
				logkey.Table, t.in.Table().String(), logkey.Batches, len(g), logkey.Error, err)
			return nil
		}
		return err
	}
	// Results recorded before grouped commits committed their one batch.
	n := min(max(res.Refs, 1), len(g))
	t.isolate = max(t.isolate-n, 0)
	// Refs signalled while the commit ran were inserted in order; the committed ones are still
	// the ones with the group's URIs.
	done := make(map[string]bool, n)
	for _, r := range g[:n] {
		done[r.URI] = true
	}
	t.window = slices.DeleteFunc(t.window, func(r staging.BatchRef) bool { return done[r.URI] })
	if res.Schema != nil {
		// The source table changed (ADD COLUMN) and CommitBatch evolved the target.
		t.in.Spec.Schema = *res.Schema
	}
	t.position, t.hasPosition = maxPosition(t.position, res.Position), true
	t.rows += res.Rows
	t.batches += int64(n)
	if res.Rows > 0 {
		t.sinceMaintenance++
	}
	t.commits++
	return nil
}

// nextGroup returns the batches the next commit takes: the window's first, and the ones after it
// of the same phase while the group stays within the table's bounds (CommitGroupRefs refs,
// CommitGroupBytes staged bytes, CommitGroupRows rows; one while a poison group is isolated).
// The window holds the next staged batches without gaps, so its first batches are consecutive:
// committing them together is committing them one by one in one sink commit (CommitBatch).
func (t *table) nextGroup() []staging.BatchRef {
	first := t.window[0]
	bytes, rows := first.Bytes, first.Rows
	n := 1
	for n < len(t.window) && n < t.opts.CommitGroupRefs && t.isolate == 0 {
		r := t.window[n]
		if r.Phase != first.Phase || bytes+r.Bytes > t.opts.CommitGroupBytes || rows+r.Rows > t.opts.CommitGroupRows {
			break
		}
		bytes, rows = bytes+r.Bytes, rows+r.Rows
		n++
	}
	return slices.Clone(t.window[:n])
}

// listNext lists the next window of staged batches after the committed position. Refs
// signalled while it runs join the listed ones (mergeWindow); when it fails the window is
// dropped, since signalled refs alone may have gaps before them.
func (t *table) listNext(ctx workflow.Context) error {
	t.window, t.beyond = nil, 0
	in := activities.NextBatchesInput{Table: t.in.TableConfig, After: t.position, HasPosition: t.hasPosition, Window: windowLimit()}
	var res activities.NextBatchesResult
	if err := t.exec(ctx, summarized(streamActivity(), listSummary(t.position, t.hasPosition)), commitActs.NextBatches, in, &res); err != nil {
		t.forgetWindow()
		return err
	}
	t.mergeWindow(res.Refs, res.More, res.StagedHi)
	return nil
}

// continueAsNewDue reports whether this run has done enough to hand over to a new run. A
// backfill is never interrupted by it: its session belongs to this run.
func (t *table) continueAsNewDue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return t.commits >= t.opts.MaxCommitsPerRun ||
		info.GetCurrentHistoryLength() >= t.opts.MaxHistoryEvents ||
		info.GetContinueAsNewSuggested() ||
		// Asked only when due, so runs recorded before the bytes budget replay unchanged.
		info.GetCurrentHistorySize() >= ContinueAsNewAtBytes &&
			workflow.GetVersion(ctx, "continue-at-history-bytes", workflow.DefaultVersion, 1) == 1
}

// next is the input of the run this one continues as.
func (t *table) next() TableInput {
	next := t.in
	next.State = &TableState{
		Position: t.position, Paused: t.paused,
		Rows: t.rows, Batches: t.batches, Runs: t.runs + 1,
		SinceMaintenance: t.sinceMaintenance, LastMaintenance: t.lastMaintenance,
		LastError: t.lastError, Failures: t.failures,
	}
	return next
}

// fail records err and turns it into the run's failure. Non-retryable activity failures
// (PoisonBatch, SourceMismatch, ...) fail the workflow with the same type and message, not
// retried, so the table stops until the operator acts; anything else fails the run retryably.
//
// TableRemoved (the workers' config no longer lists the table) is no failure: the run ends
// cleanly in StateRemoved, so the next `sluice start` of a config that lists it again starts it.
func (t *table) fail(ctx workflow.Context, err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == failure.TableRemoved {
		t.lastError = appErr.Message()
		workflow.GetLogger(ctx).Warn("table removed from the workers' config; its run ends", logkey.Table, t.in.Table().String())
		return t.setState(ctx, StateRemoved)
	}
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
	t.showDetails(ctx)
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
		QueueLength: len(t.window) + t.beyond, LagBytes: lagBytes(t.stagedHi, t.position), OldestQueuedCommit: oldestCommit(t.window), Paused: t.paused,
		LastError: t.lastError, Backfill: t.progress, LastMaintenance: t.lastMaintenance,
	}, nil
}

// shortActivity is the options of quick activities: retried forever, visibly; they heartbeat
// (the worker's activities.Heartbeats interceptor), so a lost worker is noticed after
// ShortHeartbeat.
func shortActivity() workflow.ActivityOptions {
	return workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Minute, HeartbeatTimeout: ShortHeartbeat, RetryPolicy: RetryForever()}
}

// summarized is opts with the activity's summary for the Web UI.
func summarized(opts workflow.ActivityOptions, summary string) workflow.ActivityOptions {
	opts.Summary = summary
	return opts
}

// listSummary is a NextBatches' summary.
func listSummary(after batch.SourcePosition, has bool) string {
	if !has {
		return "list staged batches"
	}
	return "list staged batches after " + after.Position.String()
}

// streamActivity is shortActivity with StreamAttempts attempts: the workflow retries (retry).
func streamActivity() workflow.ActivityOptions {
	o := shortActivity()
	o.RetryPolicy = boundedRetry()
	return o
}

// boundedRetry is RetryForever's backoff for StreamAttempts attempts.
func boundedRetry() *temporal.RetryPolicy {
	p := RetryForever()
	p.MaximumAttempts = StreamAttempts
	return p
}

// windowLimit bounds every window of staged batches the workflow asks for.
func windowLimit() activities.WindowLimit {
	return activities.WindowLimit{Refs: WindowRefs, Bytes: WindowBytes}
}
