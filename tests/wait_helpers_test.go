package tests

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/workflows"
)

// The suite waits on conditions, each with a reason and a deadline (localrun.WaitFor and the
// helpers below). Real time passes on purpose in two places only: pace, the gap between a
// background writer's transactions (the workload's shape, not a synchronisation), and holdFor,
// where a test proves that something does not happen within a window or keeps a fault for a set
// length, and no condition can be observed instead.

// pace waits d between two writes of a background writer, or until ctx ends; it reports
// whether the writer goes on.
func pace(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// holdFor lets d pass on purpose and logs why. It is for a window in which a test proves an
// absence (nothing is committed, the slot does not move) or keeps a fault for a set length:
// everything else waits on a condition. It returns early, failing the test, when the test's
// context ends.
func holdFor(t *testing.T, d time.Duration, why string) {
	t.Helper()
	if d <= 0 {
		return
	}
	t.Logf("holding %s: %s", d.Round(time.Millisecond), why)
	select {
	case <-t.Context().Done():
		t.Fatalf("holding %s (%s): %v", d, why, t.Context().Err())
	case <-time.After(d):
	}
}

// holdWatching is holdFor that calls check at the window's start and every interval through
// it; it returns false as soon as check does (the absence it watches for ended, the caller says
// how), true once d has passed.
func holdWatching(t *testing.T, d, interval time.Duration, why string, check func() bool) bool {
	t.Helper()
	t.Logf("holding %s, checking every %s: %s", d.Round(time.Millisecond), interval, why)
	for end := time.Now().Add(d); time.Now().Before(end); {
		if !check() {
			return false
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("holding %s (%s): %v", d, why, t.Context().Err())
		case <-time.After(min(interval, time.Until(end))):
		}
	}
	return true
}

// writeCount counts what a background writer has written (statements, transactions or rounds,
// as the writer says) so that a test waits for writes to be in flight instead of for a time.
type writeCount struct {
	n     atomic.Int64
	ended atomic.Bool
}

// add counts one more write.
func (c *writeCount) add() { c.n.Add(1) }

// finish marks the writer ended: waits on it return at once.
func (c *writeCount) finish() { c.ended.Store(true) }

// restart marks the writer running again.
func (c *writeCount) restart() { c.ended.Store(false) }

// count is how many writes were counted so far.
func (c *writeCount) count() int64 { return c.n.Load() }

// waitMore waits until n more writes than now are counted, or the writer ended (its own error,
// reported where it is stopped, says why), for the reason why.
func (c *writeCount) waitMore(t *testing.T, n int64, why string) {
	t.Helper()
	c.waitFor(t, c.count()+n, why)
}

// waitFor waits until at least n writes are counted in all, or the writer ended.
func (c *writeCount) waitFor(t *testing.T, n int64, why string) {
	t.Helper()
	err := localrun.WaitFor(context.Background(), fmt.Sprintf("%d writes (%s)", n, why), 2*time.Minute, 20*time.Millisecond,
		func(context.Context) (bool, string, error) {
			got := c.count()
			return got >= n || c.ended.Load(), fmt.Sprintf("%d written", got), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// pendingActivity returns workflow id's pending activity of the given type, if any.
func pendingActivity(ctx context.Context, p *icebergPipeline, id, activityType string) (*workflowpb.PendingActivityInfo, error) {
	desc, err := p.temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, err
	}
	for _, a := range desc.GetPendingActivities() {
		if a.GetActivityType().GetName() == activityType {
			return a, nil
		}
	}
	return nil, nil
}

// readerAttempt identifies the source workflow's current ReadStream attempt ("" when none is
// pending): a failed or ended attempt changes it.
func (p *icebergPipeline) readerAttempt(ctx context.Context) (string, error) {
	a, err := pendingActivity(ctx, p, workflows.SourceWorkflowID(p.name), "ReadStream")
	if err != nil || a == nil {
		return "", err
	}
	return fmt.Sprintf("activity %s attempt %d", a.GetActivityId(), a.GetAttempt()), nil
}

// waitReaderRetried waits until the reader's attempt is no longer before (a readerAttempt): the
// attempt failed (Temporal retries it, as `sluice status` shows: retrying) or ended, because of
// what why says.
func (p *icebergPipeline) waitReaderRetried(before, why string) {
	p.t.Helper()
	var last string
	err := localrun.WaitFor(context.Background(), "ReadStream to fail and be retried while "+why, 2*time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			a, err := pendingActivity(ctx, p, workflows.SourceWorkflowID(p.name), "ReadStream")
			if err != nil {
				return false, "", err
			}
			if a == nil {
				return before != "", "no pending ReadStream", nil
			}
			now := fmt.Sprintf("activity %s attempt %d", a.GetActivityId(), a.GetAttempt())
			last = fmt.Sprintf("%s, last failure %q", now, a.GetLastFailure().GetMessage())
			return now != before, last, nil
		})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("the reader while %s: %s", why, last)
}

// waitTableRetrying waits until the table's workflow records a failed stream step (its status'
// last_error: the activity's own attempts are spent and the workflow retries after a timer), so an outage lasts past one whole execution of the failing activity. It returns the
// last error.
func (p *icebergPipeline) waitTableRetrying(table batch.TableName, why string) string {
	p.t.Helper()
	var lastError string
	err := localrun.WaitFor(context.Background(), "the table's workflow to retry a failed step while "+why, 3*time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, table, p.started)
			if err != nil {
				return false, "", err
			}
			lastError = st.LastError
			return st.LastError != "", fmt.Sprintf("phase %s, batches %d, no last error", st.Phase, st.Batches), nil
		})
	if err != nil {
		p.t.Fatal(err)
	}
	return lastError
}

// waitCommitted waits until the table has committed at least n batches (the status' count) and
// returns the count.
func (p *icebergPipeline) waitCommitted(table batch.TableName, n int64, why string) int64 {
	p.t.Helper()
	var got int64
	err := localrun.WaitFor(context.Background(), fmt.Sprintf("%s to commit %d batches (%s)", table, n, why), 2*time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, table, p.started)
			if err != nil {
				return false, "", err
			}
			got = st.Batches
			return got >= n, fmt.Sprintf("%d committed, phase %s, error %q", got, st.Phase, st.LastError), nil
		})
	if err != nil {
		p.t.Fatal(err)
	}
	return got
}

// waitPaused waits until the table's workflow reports itself paused (the pause signal reached it).
func (p *icebergPipeline) waitPaused(table batch.TableName) {
	p.t.Helper()
	err := localrun.WaitFor(context.Background(), table.String()+" to be paused", 2*time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, table, p.started)
			return err == nil && st.Paused, fmt.Sprintf("paused %v, phase %s", st.Paused, st.Phase), err
		})
	if err != nil {
		p.t.Fatal(err)
	}
}
