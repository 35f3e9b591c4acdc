package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/backfill"
)

// A backfill's copy runs as CopySnapshot activities (slices) in the snapshot's session, each
// copying many chunks and returning after its slice's time with the cursor: about six history
// events per slice, whatever the chunk count. The slices lengthen (backfillSliceFirst, growing
// by half up to backfillSliceMax) so the status shows progress at least every backfillSliceMax;
// after backfillSteadySlices slices, or once the run's history holds half its budget
// (TableOptions.MaxHistoryEvents), each slice doubles the last, so a backfill of any length adds
// at most a few dozen slices more. A pause cancels the running slice (copyInSlices). (The merge's shared budget constants: 10,000 events per run.)
const (
	backfillSliceFirst   = 30 * time.Second
	backfillSliceMax     = 5 * time.Minute
	backfillSteadySlices = 600
	// backfillSliceSlack bounds one slice's last write past its time (StartToCloseTimeout).
	backfillSliceSlack = time.Hour
	// backfillHeartbeat is the CopySnapshot heartbeat timeout: it heartbeats its cursor after
	// every chunk read and every write, and repeats it every few seconds in between.
	backfillHeartbeat = ShortHeartbeat
)

// copyInSlices copies the snapshot with CopySnapshot slices until it is done, adding each
// slice's rows to the status's progress. A pause cancels the running slice: the activity ends
// after the chunk it reads and returns the cursor of what it wrote (WaitForCancellation), the
// progress is recorded, and the next slice starts from that cursor once the table is resumed,
// in the same session. A slice cancelled before it reported (not started yet, or a canceled
// result without its cursor) resumes from the last known cursor; rewriting rows is idempotent.
func (t *table) copyInSlices(ctx, sctx workflow.Context, info activities.SnapshotInfo) error {
	cancelOnPause := workflow.GetVersion(ctx, "backfill-pause-cancels-slice", workflow.DefaultVersion, 1) != workflow.DefaultVersion
	var after []string
	var ranges []backfill.RangeCursor
	slice := backfillSliceFirst
	for n := 0; ; n++ {
		if err := workflow.Await(ctx, func() bool { return !t.paused }); err != nil {
			return err
		}
		actx := workflow.WithActivityOptions(sctx, workflow.ActivityOptions{
			StartToCloseTimeout: slice + backfillSliceSlack,
			HeartbeatTimeout:    backfillHeartbeat,
			RetryPolicy:         RetryForever(),
			WaitForCancellation: cancelOnPause,
			Summary:             copySummary("slice", after, info.Position),
		})
		actx, cancel := workflow.WithCancel(actx)
		in := activities.CopySnapshotInput{
			Table: t.in.TableConfig, Snapshot: info, After: after, Ranges: ranges,
			ChunkRows: t.opts.SnapshotChunkRows, ChunkBytes: t.opts.SnapshotChunkBytes, Parallelism: t.opts.SnapshotParallelism,
			ApplyBytes: t.opts.SnapshotApplyBytes, RunFor: slice,
		}
		fut := workflow.ExecuteActivity(actx, backfillActs.CopySnapshot, in)
		cancelled := false
		if cancelOnPause {
			if err := workflow.Await(ctx, func() bool { return fut.IsReady() || t.paused }); err != nil {
				cancel()
				return err
			}
			if !fut.IsReady() {
				cancel()
				cancelled = true
			}
		}
		var res backfill.Cursor
		err := fut.Get(ctx, &res)
		cancel()
		if err != nil {
			var ce *temporal.CanceledError
			if !cancelled || !errors.As(err, &ce) {
				return t.sessionError(sctx, "copying the snapshot", err)
			}
			res = backfill.Cursor{}
			if ce.HasDetails() && ce.Details(&res) != nil {
				res = backfill.Cursor{}
			}
		}
		t.progress.Rows += res.Rows
		t.progress.Chunks += res.Chunks
		t.showDetails(ctx)
		if len(res.Last) > 0 {
			after = res.Last
		}
		if len(res.Ranges) > 0 {
			ranges = res.Ranges // a parallel copy's ranges and their cursors (input only: no new command)
		}
		if res.Done {
			return nil
		}
		slice = nextSlice(slice, n+1, workflow.GetInfo(ctx).GetCurrentHistoryLength(), t.opts.MaxHistoryEvents)
	}
}

// nextSlice is the time of the slice after one of time d, when n slices ran and the run's
// history holds events of budget.
func nextSlice(d time.Duration, n, events, budget int) time.Duration {
	if n >= backfillSteadySlices || (budget > 0 && events >= budget/2) {
		return 2 * d
	}
	return min(d+d/2, backfillSliceMax)
}
