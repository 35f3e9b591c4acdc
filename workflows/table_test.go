package workflows

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/catalogwatch"
	"github.com/sluicecdc/sluice/failure"
)

// finish runs the workflow, canceling it at stopAt (0: it must end by itself), and returns its
// error.
func finish(t *testing.T, env interface {
	RegisterDelayedCallback(func(), time.Duration)
	CancelWorkflow()
	ExecuteWorkflow(any, ...any)
	IsWorkflowCompleted() bool
	GetWorkflowError() error
}, in TableInput, stopAt time.Duration) error {
	t.Helper()
	if stopAt > 0 {
		env.RegisterDelayedCallback(env.CancelWorkflow, stopAt)
	}
	env.ExecuteWorkflow(TableWorkflowType, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	return env.GetWorkflowError()
}

func TestTableWorkflowCommitsInPositionOrder(t *testing.T) {
	t.Parallel()
	// Found in staging by LoadTable and signalled, both out of order.
	w := newWorld(true, 5, ref(300, 399), ref(10, 99))
	env := newEnv(t, w, time.Second)
	env.RegisterDelayedCallback(func() {
		w.stage(ref(200, 299))
		env.SignalWorkflow(SignalBatch, ref(200, 299))
		w.stage(ref(100, 199))
		env.SignalWorkflow(SignalBatch, ref(100, 199))
		w.stage(ref(400, 499))
		env.SignalWorkflow(SignalBatch, ref(400, 499))
	}, time.Millisecond)
	var st TableStatus
	env.RegisterDelayedCallback(func() { st = queryStatus(t, env) }, time.Hour-time.Second)

	// The signalled refs are not in the world's staging, so its listing does not find them: a
	// group formed before the signals would skip them. One batch per commit lets them arrive
	// in between, as they would be staged in between.
	err := finish(t, env, TableInput{TableConfig: testTable, Options: TableOptions{CommitGroupRefs: 1}}, time.Hour)
	if !temporal.IsCanceledError(err) {
		t.Fatalf("workflow ended with %v, want the test's cancellation", err)
	}
	applied, _, pos := w.snapshotOf()
	if want := []string{"10..99", "100..199", "200..299", "300..399", "400..499"}; !equalStrings(applied, want) {
		t.Fatalf("applied %v, want %v", applied, want)
	}
	if pos != sp(499) || st.Position != sp(499) || st.Phase != StateStream || st.QueueLength != 0 || st.Batches != 5 {
		t.Fatalf("sink at %s, status %+v; want both at 0/1F3, phase stream, empty queue, 5 batches", pos, st)
	}
}

func TestTableWorkflowDuplicateAndOverlappingRefs(t *testing.T) {
	t.Parallel()
	w := newWorld(true, 5)
	env := newEnv(t, w, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPause, nil) // let every ref queue up first
		w.stage(ref(10, 30))
		env.SignalWorkflow(SignalBatch, ref(10, 30))
		w.stage(ref(10, 30))
		env.SignalWorkflow(SignalBatch, ref(10, 30)) // the same file signalled twice
		w.stage(ref(25, 40))
		env.SignalWorkflow(SignalBatch, ref(25, 40)) // overlaps 10..30: trimmed to 31..40
		w.stage(ref(15, 20))
		env.SignalWorkflow(SignalBatch, ref(15, 20)) // inside 10..30: skipped, acknowledged
		w.stage(ref(10, 30))
		env.SignalWorkflow(SignalBatch, ref(10, 30))
	}, time.Millisecond)
	env.RegisterDelayedCallback(func() {
		if st := queryStatus(t, env); st.QueueLength != 3 {
			t.Errorf("queue holds %d refs, want 3 (duplicates removed)", st.QueueLength)
		}
		env.SignalWorkflow(SignalResume, nil)
	}, time.Minute)

	if err := finish(t, env, TableInput{TableConfig: testTable}, time.Hour); !temporal.IsCanceledError(err) {
		t.Fatalf("workflow ended with %v", err)
	}
	applied, calls, pos := w.snapshotOf()
	if want := []string{"10..30", "31..40"}; !equalStrings(applied, want) {
		t.Fatalf("applied %v, want %v", applied, want)
	}
	if n := strings.Count(strings.Join(calls, " "), "CommitBatch"); n != 1 {
		t.Fatalf("CommitBatch ran %d times, want once (10..30, 15..20 skipped and acknowledged, 25..40 trimmed, in one group)", n)
	}
	if len(w.staged) != 0 || pos != sp(40) {
		t.Fatalf("staging still holds %v, sink at %s; want all acknowledged, position 0/28", w.staged, pos)
	}
}

func TestTableWorkflowPoisonBatchStopsTheTable(t *testing.T) {
	t.Parallel()
	a, b, c := ref(10, 19), ref(20, 29), ref(30, 39)
	w := newWorld(true, 5, a, b, c)
	w.poison[b.URI] = errors.New(`column "discount" does not exist in raw.orders`)
	env := newEnv(t, w, time.Second)

	err := finish(t, env, TableInput{TableConfig: testTable}, 0)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != "PoisonBatch" || !appErr.NonRetryable() {
		t.Fatalf("workflow ended with %v, want a non-retryable PoisonBatch error", err)
	}
	for _, want := range []string{"shop.orders", b.Range(), `column "discount" does not exist`} {
		if !strings.Contains(appErr.Error(), want) {
			t.Errorf("error %q does not name %q", appErr.Error(), want)
		}
	}
	applied, _, pos := w.snapshotOf()
	if !equalStrings(applied, []string{"10..19"}) || pos != a.Hi {
		t.Fatalf("applied %v with the sink at %s: want only 10..19 and the position at its hi", applied, pos)
	}
	if _, ok := w.staged[b.URI]; !ok {
		t.Fatal("the poison batch was acknowledged: its staged file is gone")
	}
	st := queryStatus(t, env)
	if st.Phase != StateFailed || st.Position != a.Hi || !strings.Contains(st.LastError, "discount") {
		t.Fatalf("status %+v: want phase failed, position %s, the cause as last error", st, a.Hi)
	}
}

func TestTableWorkflowResumeAfterFixConverges(t *testing.T) {
	t.Parallel()
	a, b, c := ref(10, 19), ref(20, 29), ref(30, 39)
	w := newWorld(true, 5, a, b, c)
	w.poison[b.URI] = errors.New("cannot cast 'abc' to integer")
	if err := finish(t, newEnv(t, w, time.Second), TableInput{TableConfig: testTable}, 0); err == nil {
		t.Fatal("the first run did not stop on the poison batch")
	}

	// The operator fixes the cause and sends resume with signal-with-start: a new run with the
	// same input, which reloads the position from the sink and the queue from staging.
	delete(w.poison, b.URI)
	env := newEnv(t, w, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalResume, nil) }, 0)
	if err := finish(t, env, TableInput{TableConfig: testTable}, time.Hour); !temporal.IsCanceledError(err) {
		t.Fatalf("resumed run ended with %v", err)
	}
	applied, _, pos := w.snapshotOf()
	if want := []string{"10..19", "20..29", "30..39"}; !equalStrings(applied, want) || pos != c.Hi {
		t.Fatalf("applied %v with the sink at %s, want %v and %s", applied, pos, want, c.Hi)
	}
	if len(w.staged) != 0 {
		t.Fatalf("staging still holds %v after converging", w.staged)
	}
}

func TestTableWorkflowContinueAsNewKeepsPosition(t *testing.T) {
	t.Parallel()
	w := newWorld(true, 5, ref(10, 19), ref(20, 29), ref(30, 39), ref(40, 49))
	env := newEnv(t, w, time.Second)
	env.RegisterDelayedCallback(func() {
		w.stage(ref(50, 59))
		env.SignalWorkflow(SignalBatch, ref(50, 59))
	}, time.Millisecond)
	in := TableInput{TableConfig: testTable, Options: TableOptions{MaxCommitsPerRun: 2, CommitGroupRefs: 1}}

	err := finish(t, env, in, 0)
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new after 2 commits", err)
	}
	var next TableInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil || next.State.Position != sp(29) || next.State.Batches != 2 {
		t.Fatalf("carried state %+v: want position 0/1D, 2 batches", next.State)
	}
	if next.Options.MaxCommitsPerRun != 2 || next.TableConfig.Spec.Target != testTable.Spec.Target {
		t.Fatalf("continued input lost the table or its options: %+v", next)
	}

	// The next run lists the rest from staging (the signalled ref was staged before it was
	// signalled) and commits each once.
	w.staged[ref(50, 59).URI] = ref(50, 59)
	next.Options.MaxCommitsPerRun = 100
	if err := finish(t, newEnv(t, w, time.Second), next, time.Hour); !temporal.IsCanceledError(err) {
		t.Fatalf("continued run ended with %v", err)
	}
	applied, _, pos := w.snapshotOf()
	if want := []string{"10..19", "20..29", "30..39", "40..49", "50..59"}; !equalStrings(applied, want) || pos != sp(59) {
		t.Fatalf("applied %v with the sink at %s, want %v", applied, pos, want)
	}
}

func TestTableWorkflowLostSessionReSnapshotsFromCleanTable(t *testing.T) {
	t.Parallel()
	w := newWorld(false, 0, ref(900, 1099))
	w.loseAt = 2 // the second slice's worker dies
	env := newEnv(t, w, time.Second)
	var during, retrying TableStatus
	env.RegisterDelayedCallback(func() { during = queryStatus(t, env) }, 1500*time.Millisecond)
	env.RegisterDelayedCallback(func() { retrying = queryStatus(t, env) }, 3*time.Second)

	if err := finish(t, env, TableInput{TableConfig: testTable}, time.Hour); !temporal.IsCanceledError(err) {
		t.Fatalf("run ended with %v, want it still running (the lost session retried in the run)", err)
	}
	if during.Phase != StateBackfill || during.Backfill == nil || during.Backfill.Rows != 100 || during.Backfill.EstimatedRows != 300 {
		t.Fatalf("status during the backfill %+v: want phase backfill, 100 of ~300 rows", during)
	}
	if !strings.Contains(retrying.LastError, "snapshot session lost") {
		t.Fatalf("status while waiting to backfill again: last error %q, want the lost session", retrying.LastError)
	}
	applied, calls, pos := w.snapshotOf()
	wantTail := []string{"DiscardSnapshot", "BeginSnapshot", "CopySnapshot", "CopySnapshot", "CopySnapshot", "EndSnapshot", "CommitBatch"}
	if len(calls) < len(wantTail) || !equalStrings(calls[len(calls)-len(wantTail):], wantTail) || countString(calls, "DiscardSnapshot") != 2 {
		t.Fatalf("the run called %v, want a second snapshot after a discard, ending %v", calls, wantTail)
	}
	if want := []string{"chunks 1-1", "chunks 2-2", "chunks 3-3", "1001..1099"}; !equalStrings(applied, want) || pos != sp(1099) {
		t.Fatalf("sink holds %v at %s, want %v: a clean snapshot, then the rows after its position 1000", applied, pos, want)
	}
}

func TestTableWorkflowPauseAndResume(t *testing.T) {
	t.Parallel()
	w := newWorld(true, 5)
	env := newEnv(t, w, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPause, nil) }, 0)
	env.RegisterDelayedCallback(func() {
		w.stage(ref(10, 19))
		env.SignalWorkflow(SignalBatch, ref(10, 19))
		w.stage(ref(20, 29))
		env.SignalWorkflow(SignalBatch, ref(20, 29))
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		applied, _, _ := w.snapshotOf()
		if st.Phase != StatePaused || !st.Paused || st.QueueLength != 2 || len(applied) != 0 {
			t.Errorf("while paused: status %+v, applied %v; want phase paused, 2 queued, nothing applied", st, applied)
		}
		if st.LagBytes != 29-5 {
			t.Errorf("lag while paused = %d bytes, want %d", st.LagBytes, 29-5)
		}
		env.SignalWorkflow(SignalResume, nil)
	}, time.Minute)
	var after TableStatus
	env.RegisterDelayedCallback(func() { after = queryStatus(t, env) }, 10*time.Minute)

	if err := finish(t, env, TableInput{TableConfig: testTable}, time.Hour); !temporal.IsCanceledError(err) {
		t.Fatalf("workflow ended with %v", err)
	}
	applied, _, _ := w.snapshotOf()
	if !equalStrings(applied, []string{"10..19", "20..29"}) || after.Phase != StateStream || after.QueueLength != 0 {
		t.Fatalf("after resume: applied %v, status %+v", applied, after)
	}
}

// TestTableWorkflowStartedWithoutColumnsReadsTheSchema is a table started by hand (the Temporal
// CLI's signal-with-start gives no columns): its run reads the schema before it ensures the
// target, then streams as usual.
func TestTableWorkflowStartedWithoutColumnsReadsTheSchema(t *testing.T) {
	t.Parallel()
	w := newWorld(true, 5, ref(10, 99))
	env := newEnv(t, w, time.Second)
	bare := testTable
	bare.Spec.Schema.Columns = nil
	err := finish(t, env, TableInput{TableConfig: bare}, time.Hour)
	if !temporal.IsCanceledError(err) {
		t.Fatalf("workflow ended with %v, want the test's cancellation", err)
	}
	applied, calls, _ := w.snapshotOf()
	if len(calls) < 2 || calls[0] != "TableSchema" || calls[1] != "EnsureTable" {
		t.Fatalf("calls %v, want TableSchema then EnsureTable first", calls)
	}
	if want := []string{"10..99"}; !equalStrings(applied, want) {
		t.Fatalf("applied %v, want %v", applied, want)
	}
}

// TestTableWorkflowStopSignal: SignalStop fails the run with the request's type and message, not
// retried; a request found against the content that the run's own backfill replaced (another
// epoch) is ignored.
func TestTableWorkflowStopSignal(t *testing.T) {
	t.Parallel()
	current := catalogwatch.Epoch("00000003-1", sp(1000).Position) // what world.begin exports
	tests := []struct {
		name     string
		hasPos   bool
		epochs   []string // stop requests sent, in order, after the backfill if any
		wantStop bool
	}{
		{"streaming table stops", true, []string{""}, true},
		{"stale request after a backfill is ignored", false, []string{"old@0/1"}, false},
		{"request of the current epoch stops", false, []string{"old@0/1", current}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(tt.hasPos, 5, ref(10, 19))
			env := newEnv(t, w, time.Second)
			for i, e := range tt.epochs {
				env.RegisterDelayedCallback(func() {
					env.SignalWorkflow(SignalStop, StopRequest{Type: failure.PartitionChanged, Message: "table shop.orders: partition gone", Epoch: e})
				}, time.Duration(i+1)*time.Minute)
			}
			err := finish(t, env, TableInput{TableConfig: testTable}, time.Hour)
			var appErr *temporal.ApplicationError
			stopped := errors.As(err, &appErr) && appErr.Type() == failure.PartitionChanged
			if stopped != tt.wantStop {
				t.Fatalf("run ended with %v; want stopped: %v", err, tt.wantStop)
			}
			if stopped && (!appErr.NonRetryable() || !strings.Contains(appErr.Error(), "partition gone")) {
				t.Fatalf("run ended with %v: want the request's message, not retryable", err)
			}
			if !stopped && !temporal.IsCanceledError(err) {
				t.Fatalf("run ended with %v, want it still running until cancelled", err)
			}
		})
	}
}
