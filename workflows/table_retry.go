package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/internal/logkey"
)

// errInterrupted: a step stopped before it succeeded because the run must continue as new (its
// history reached the budget) or the table was paused or asked to resync. Nothing was skipped:
// the step runs again after that.
var errInterrupted = errors.New("interrupted: the run continues as new, pauses or resyncs first")

// exec runs one activity and waits for it, unless the run's history reaches its budget first:
// then it cancels the activity (every stream-phase activity is idempotent), waits for it to stop
// and returns errInterrupted, so the run continues as new however long the activity would run.
func (t *table) exec(ctx workflow.Context, opts workflow.ActivityOptions, activity, in, out any) error {
	actx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	opts.WaitForCancellation = true
	fut := workflow.ExecuteActivity(workflow.WithActivityOptions(actx, opts), activity, in)
	if err := workflow.Await(ctx, func() bool { return fut.IsReady() || t.continueAsNewDue(ctx) }); err != nil {
		return err
	}
	if !fut.IsReady() {
		cancel()
		_ = fut.Get(ctx, nil) // the activity's outcome no longer matters: the next run reads the sink
		return errInterrupted
	}
	return fut.Get(ctx, out)
}

// retry runs step until it succeeds. A failure that retrying cannot fix (a non-retryable
// activity error: poison, source mismatch, ...) and the run's own cancellation are returned at
// once. Any other failure is recorded (the status query's last_error, the log), then step runs
// again after a workflow timer (backoff up to OutageBackoffMax): a sink or staging outage of any
// length retries visibly, in runs that continue as new within the budget. errInterrupted is
// returned when the run must continue as new first, or, for a stream step, when the table is
// paused or asked to resync.
func (t *table) retry(ctx workflow.Context, what string, stream bool, step func(workflow.Context) error) error {
	interrupt := func() bool { return t.continueAsNewDue(ctx) || stream && (t.paused || t.resync || t.stop != nil) }
	for {
		err := step(ctx)
		if err == nil {
			t.lastError, t.failures = "", 0
			return nil
		}
		var appErr *temporal.ApplicationError
		if errors.Is(err, errInterrupted) || ctx.Err() != nil || errors.As(err, &appErr) && appErr.NonRetryable() {
			return err
		}
		t.failures++
		t.lastError = fmt.Sprintf("%s (failure %d, retrying): %v", what, t.failures, err)
		t.showDetails(ctx)
		wait := backoff(t.failures)
		workflow.GetLogger(ctx).Warn("table step failed; retrying", logkey.Table, t.in.Table().String(),
			logkey.Step, what, logkey.Failures, t.failures, logkey.RetryIn, wait, logkey.Error, err)
		interrupted, err := workflow.AwaitWithTimeout(ctx, wait, interrupt)
		if err != nil {
			return err
		}
		if interrupted {
			return errInterrupted
		}
	}
}

// backoff is the wait after the n-th consecutive failure: 5 s doubling up to OutageBackoffMax.
func backoff(n int) time.Duration {
	d := 5 * time.Second
	for i := 1; i < n && d < OutageBackoffMax; i++ {
		d *= 2
	}
	return min(d, OutageBackoffMax)
}
