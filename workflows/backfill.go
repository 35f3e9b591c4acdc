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
	"github.com/sluicecdc/sluice/catalogwatch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
)

// backfill copies the table under an exported snapshot: DiscardSnapshot first (whatever a lost
// earlier attempt left is never trusted), then BeginSnapshot, CopySnapshot slices until done
// (copyInSlices) and EndSnapshot in one session pinned to the worker holding the snapshot. The snapshot's position
// becomes the table's position; queued batches at or below it are skipped or trimmed by
// CommitBatch.
func (t *table) backfill(ctx workflow.Context) error {
	if err := t.setState(ctx, StateBackfill); err != nil {
		return err
	}
	t.hasPosition = false
	t.progress = &BackfillProgress{}
	actx := workflow.WithActivityOptions(ctx, shortActivity())
	if err := t.refreshSchema(ctx, actx); err != nil {
		return err
	}
	discard := withSummary(actx, "discard what an earlier snapshot of "+t.in.Table().String()+" left in "+t.in.Spec.Target)
	if err := workflow.ExecuteActivity(discard, backfillActs.DiscardSnapshot, t.in.TableConfig).Get(ctx, nil); err != nil {
		return err
	}

	sctx, err := workflow.CreateSession(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour, // unused by sessions; required by the options
	}), &workflow.SessionOptions{
		// Sessions wait for a free place on a worker (worker.Options.MaxConcurrentSessionExecutionSize
		// is source.max_parallel_backfills): a table waits its turn without failing its run.
		CreationTimeout:  24 * time.Hour,
		ExecutionTimeout: 30 * 24 * time.Hour,
		// The session's worker heartbeats it (every third of this); when that worker dies the
		// session fails after this, and with it the run, which re-snapshots on another worker.
		HeartbeatTimeout: ShortHeartbeat,
	})
	if err != nil {
		return temporal.NewApplicationError(fmt.Sprintf("table %s: creating the snapshot session: %v", t.in.Table(), err),
			failure.SnapshotSessionLost, err)
	}
	defer workflow.CompleteSession(sctx)
	sctx = workflow.WithActivityOptions(sctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    ShortHeartbeat, // activities.Heartbeats heartbeats for them
		RetryPolicy:         RetryForever(),
	})

	var info activities.SnapshotInfo
	begin := activities.BeginSnapshotInput{Table: t.in.TableConfig}
	if err := workflow.ExecuteActivity(withSummary(sctx, "begin a snapshot of "+t.in.Table().String()), backfillActs.BeginSnapshot, begin).Get(ctx, &info); err != nil {
		return t.sessionError(sctx, "beginning the snapshot", err)
	}
	t.progress = &BackfillProgress{EstimatedRows: info.EstimatedRows, Position: info.Position}
	t.showDetails(ctx)
	if workflow.GetVersion(ctx, "backfill-copies-in-slices", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		if err := t.copyByChunk(ctx, sctx, info); err != nil {
			return err
		}
	} else if err := t.copyInSlices(ctx, sctx, info); err != nil {
		return err
	}
	end := activities.EndSnapshotInput{Table: t.in.TableConfig, Snapshot: info}
	endCtx := withSummary(sctx, fmt.Sprintf("end the snapshot at %s (%d rows copied)", info.Position.Position, t.progress.Rows))
	if err := workflow.ExecuteActivity(endCtx, backfillActs.EndSnapshot, end).Get(ctx, nil); err != nil {
		return t.sessionError(sctx, "ending the snapshot", err)
	}
	t.progress.Done = true
	t.position, t.hasPosition = info.Position, true
	t.epoch = catalogwatch.Epoch(info.Name, info.Position.Position)
	t.rows += t.progress.Rows
	return nil
}

// copyByChunk is the copy of runs recorded before copyInSlices: one CopyChunk activity per
// chunk (about six history events each), kept so that those histories replay.
func (t *table) copyByChunk(ctx, sctx workflow.Context, info activities.SnapshotInfo) error {
	var after []string
	for {
		if err := workflow.Await(ctx, func() bool { return !t.paused }); err != nil {
			return err
		}
		in := activities.CopyChunkInput{Table: t.in.TableConfig, Snapshot: info, After: after, MaxRows: t.opts.SnapshotChunkRows}
		var res activities.CopyChunkResult
		cctx := withSummary(sctx, copySummary("chunk", after, info.Position))
		if err := workflow.ExecuteActivity(cctx, backfillActs.CopyChunk, in).Get(ctx, &res); err != nil {
			return t.sessionError(sctx, "copying a chunk", err)
		}
		t.progress.Rows += res.Rows
		t.showDetails(ctx)
		after = res.Last
		if res.Done {
			return nil
		}
	}
}

// backfillRetrying runs the backfill, and runs it again after a timer (1 s, then backoff) when its
// snapshot session was lost: the session's worker died, or creating the session timed out on a
// busy worker. The next attempt discards the partial snapshot and starts again in the same run,
// and the table's status shows the loss meanwhile (last_error), where a failed run used to be
// what operators and alerts on failed workflows saw. When the run's history reaches its budget
// the loss fails the run as before, and the workflow's retry policy starts a new run, which
// backfills.
func (t *table) backfillRetrying(ctx workflow.Context) error {
	if workflow.GetVersion(ctx, "backfill-retries-lost-session", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return t.backfill(ctx)
	}
	for failures := 1; ; failures++ {
		err := t.backfill(ctx)
		var appErr *temporal.ApplicationError
		if err == nil {
			if failures > 1 {
				t.lastError = ""
			}
			return nil
		}
		if ctx.Err() != nil || !errors.As(err, &appErr) || appErr.Type() != failure.SnapshotSessionLost || t.continueAsNewDue(ctx) {
			return err
		}
		t.lastError = fmt.Sprintf("backfilling (snapshot session lost, attempt %d; starting again): %v", failures, err)
		t.showDetails(ctx)
		wait := time.Second // as soon as the retry policy restarted a failed run; then backoff
		if failures > 1 {
			wait = backoff(failures - 1)
		}
		workflow.GetLogger(ctx).Warn("snapshot session lost; backfilling again", logkey.Table, t.in.Table().String(),
			logkey.Failures, failures, logkey.RetryIn, wait, logkey.Error, err)
		if err := workflow.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// sessionError classifies a failure inside the snapshot session. Non-retryable activity errors
// (a poison row, a missing implementation) pass through. Everything else means the session or
// its worker is gone (activities in it retry forever otherwise): the run fails retryably and the
// next run re-snapshots from a clean table.
func (t *table) sessionError(sctx workflow.Context, step string, err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NonRetryable() && appErr.Type() != failure.SnapshotSessionLost {
		return err
	}
	state := "running"
	if info := workflow.GetSessionInfo(sctx); info != nil && info.SessionState == workflow.SessionStateFailed {
		state = "failed"
	}
	if errors.Is(err, workflow.ErrSessionFailed) {
		state = "failed"
	}
	return temporal.NewApplicationError(
		fmt.Sprintf("table %s: snapshot session lost while %s (session %s, %d of ~%d rows copied): %v; the backfill discards the partial snapshot and starts again",
			t.in.Table(), step, state, t.progress.Rows, t.progress.EstimatedRows, err),
		failure.SnapshotSessionLost, err)
}

// refreshSchema reads the source table's current columns before a backfill and, when they
// differ from the run's, adopts them and evolves the target. A resync must copy the columns the
// table has now: one asked for because columns were added with a default, or after a TRUNCATE
// that came with DDL, would otherwise snapshot the old column list. Runs recorded before this
// step replay without it (workflow.GetVersion).
func (t *table) refreshSchema(ctx, actx workflow.Context) error {
	if workflow.GetVersion(ctx, "backfill-refreshes-schema", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	var schema batch.Schema
	if err := workflow.ExecuteActivity(withSummary(actx, "read the columns of "+t.in.Table().String()), setupActs.TableSchema, t.in.TableConfig).Get(ctx, &schema); err != nil {
		return err
	}
	if slices.Equal(schema.Columns, t.in.Spec.Schema.Columns) {
		return nil
	}
	t.in.Spec.Schema = schema
	return workflow.ExecuteActivity(withSummary(actx, "evolve target "+t.in.Spec.Target), commitActs.EnsureTable, t.in.TableConfig).Get(ctx, nil)
}
