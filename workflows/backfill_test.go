package workflows

import (
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
)

// historyBudget is the events a run may hold (the budget docs/architecture.md states).
const historyBudget = MaxRunEvents

// estimatedEvents is an upper estimate of a run's history after calls activities, one at a
// time: each adds ActivityTaskScheduled, Started and Completed and a workflow task (Scheduled,
// Started, Completed); 30 more cover the start, search attributes, the session's own activity,
// markers and the end.
func estimatedEvents(calls int) int { return 6*calls + 30 }

// TestBackfillHistoryIsBoundedWhateverTheTableSize backfills tables of 25,000 chunks and of a
// hundred million (years of copying at a chunk a second) with the CopySnapshot mock copying as
// many chunks as its slice's time allows: every run completes the snapshot, shows its progress
// while it copies and stays far under the history budget.
func TestBackfillHistoryIsBoundedWhateverTheTableSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		chunks    int
		chunkTime time.Duration
		maxCalls  int // CopySnapshot calls allowed
	}{
		{"25,000 chunks of a fast source", 25_000, 100 * time.Millisecond, 50},
		{"25,000 chunks at one a second", 25_000, time.Second, 120},
		{"100 million chunks at one a second", 100_000_000, time.Second, 700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(false, 0)
			w.chunks, w.chunkTime = tt.chunks, tt.chunkTime
			w.maxCopies = historyBudget / 6 // a run on its way past the budget stops here instead of running on
			env := newEnv(t, w, time.Second)
			var during TableStatus
			env.RegisterDelayedCallback(func() { during = queryStatus(t, env) }, 5*time.Second)
			var after TableStatus
			env.RegisterDelayedCallback(func() { after = queryStatus(t, env) }, 23*time.Hour)

			if err := finish(t, env, TableInput{TableConfig: testTable}, 24*time.Hour); !temporal.IsCanceledError(err) {
				t.Fatalf("run ended with %v (after %d CopySnapshot calls), want the test's cancellation after the backfill", err, w.copyCalls)
			}
			_, calls, pos := w.snapshotOf()
			if w.copied != tt.chunks || pos != sp(1000) {
				t.Fatalf("copied %d of %d chunks, sink at %s: want the whole snapshot committed at 1000", w.copied, tt.chunks, pos)
			}
			if events := estimatedEvents(len(calls)); w.copyCalls > tt.maxCalls || events > historyBudget {
				t.Fatalf("%d CopySnapshot calls (%d activities, ~%d events) for %d chunks; want at most %d calls and %d events",
					w.copyCalls, len(calls), events, tt.chunks, tt.maxCalls, historyBudget)
			}
			t.Logf("%d chunks: %d CopySnapshot calls, %d activities, ~%d events", tt.chunks, w.copyCalls, len(calls), estimatedEvents(len(calls)))
			s := during.Backfill
			if during.Phase != StateBackfill || s == nil || s.Rows <= 0 || s.Rows >= int64(tt.chunks)*100 || s.Chunks*100 != s.Rows {
				t.Fatalf("status while copying %+v (snapshot %+v): want phase backfill with rows and chunks under way", during, s)
			}
			if after.Backfill == nil || !after.Backfill.Done || after.Backfill.Rows != int64(tt.chunks)*100 || after.Rows != after.Backfill.Rows {
				t.Fatalf("status after the backfill %+v (snapshot %+v): want every row counted", after, after.Backfill)
			}
		})
	}
}

// TestBackfillSlicesDoubleWhenTheHistoryHalfFills: a run whose history already holds half its
// budget (a hot table's signals) doubles each slice, so the rest of the copy costs a few events.
func TestBackfillSlicesDoubleWhenTheHistoryHalfFills(t *testing.T) {
	t.Parallel()
	w := newWorld(false, 0)
	w.chunks, w.chunkTime = 25_000, time.Second
	env := newEnv(t, w, time.Second)
	env.SetCurrentHistoryLength(historyBudget / 2)
	if err := finish(t, env, TableInput{TableConfig: testTable}, 24*time.Hour); !temporal.IsCanceledError(err) {
		t.Fatalf("run ended with %v", err)
	}
	if w.copied != w.chunks {
		t.Fatalf("copied %d of %d chunks", w.copied, w.chunks)
	}
	for i := 1; i < len(w.slices); i++ {
		if w.slices[i] != 2*w.slices[i-1] {
			t.Fatalf("slices %v: want each double the last", w.slices)
		}
	}
	if len(w.slices) > 10 {
		t.Fatalf("%d slices %v for 25,000 chunks at half budget, want at most 10", len(w.slices), w.slices)
	}
}

// TestBackfillLostSessionMidCopyReSnapshots: the session's worker dies in a later slice of a
// big copy; the run does not fail: after a timer it discards what it had copied and copies the
// whole snapshot again from a new one (a partial snapshot is never trusted), in the same run.
func TestBackfillLostSessionMidCopyReSnapshots(t *testing.T) {
	t.Parallel()
	w := newWorld(false, 0)
	w.chunks, w.chunkTime = 25_000, time.Second
	w.loseAt = 12
	if err := finish(t, newEnv(t, w, time.Second), TableInput{TableConfig: testTable}, 24*time.Hour); !temporal.IsCanceledError(err) {
		t.Fatalf("run ended with %v, want it still running (the lost session retried in the run)", err)
	}
	applied, calls, pos := w.snapshotOf()
	if pos != sp(1000) || w.copied != w.chunks || applied[0] != "chunks 1-30" {
		t.Fatalf("sink at %s, %d chunks copied, writes %v; want a copy from the first chunk (the partial ones discarded)",
			pos, w.copied, applied[:min(3, len(applied))])
	}
	if n := countString(calls, "DiscardSnapshot"); n != 2 || countString(calls, "BeginSnapshot") != 2 {
		t.Fatalf("calls %v: want two snapshots, each after a discard", calls[:min(12, len(calls))])
	}
}

// countString counts s in list.
func countString(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func TestNextSlice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		d              time.Duration
		n, events, bud int
		want           time.Duration
	}{
		{"grows by half", 30 * time.Second, 1, 20, historyBudget, 45 * time.Second},
		{"capped", 4 * time.Minute, 5, 50, historyBudget, backfillSliceMax},
		{"steady at the cap", backfillSliceMax, 100, 700, historyBudget, backfillSliceMax},
		{"doubles after the steady slices", backfillSliceMax, backfillSteadySlices, 3700, historyBudget, 2 * backfillSliceMax},
		{"doubles at half the budget", time.Minute, 3, historyBudget / 2, historyBudget, 2 * time.Minute},
		{"no budget set", time.Minute, 3, 1 << 20, 0, 90 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := nextSlice(tt.d, tt.n, tt.events, tt.bud); got != tt.want {
				t.Fatalf("nextSlice(%s, %d, %d, %d) = %s, want %s", tt.d, tt.n, tt.events, tt.bud, got, tt.want)
			}
		})
	}
}

// TestBackfillPauseCancelsTheRunningSlice: a pause while a CopySnapshot slice runs cancels it
// (the pause takes effect without waiting for the slice's end), the status shows the progress
// of the slices done and no copy runs while paused; after resume the copy goes on from the
// cursor in the same snapshot, and every chunk is written once.
func TestBackfillPauseCancelsTheRunningSlice(t *testing.T) {
	t.Parallel()
	w := newWorld(false, 0)
	w.chunks = 6 // one chunk per slice, each slice taking 10 s
	env := newEnv(t, w, 10*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPause, nil) }, 25*time.Second) // mid slice 3
	var paused TableStatus
	var callsPaused int
	env.RegisterDelayedCallback(func() {
		paused = queryStatus(t, env)
		w.mu.Lock()
		callsPaused = w.copyCalls
		w.mu.Unlock()
	}, 10*time.Minute)
	var resumedAt int
	env.RegisterDelayedCallback(func() {
		w.mu.Lock()
		resumedAt = w.copyCalls
		w.mu.Unlock()
		env.SignalWorkflow(SignalResume, nil)
	}, time.Hour)
	if err := finish(t, env, TableInput{TableConfig: testTable}, 24*time.Hour); !temporal.IsCanceledError(err) {
		t.Fatalf("run ended with %v", err)
	}
	applied, calls, pos := w.snapshotOf()
	if w.cancelledCopies != 1 || callsPaused != 3 || resumedAt != callsPaused {
		t.Fatalf("%d slices cancelled, %d CopySnapshot calls when paused, %d at resume: want the third slice cancelled by the pause and none while paused",
			w.cancelledCopies, callsPaused, resumedAt)
	}
	s := paused.Backfill
	if !paused.Paused || paused.Phase != StateBackfill || s == nil || s.Done || s.Chunks != 2 || s.Rows != 200 {
		t.Fatalf("status while paused %+v (snapshot %+v): want paused in the backfill with the 2 chunks copied", paused, s)
	}
	want := "[chunks 1-1 chunks 2-2 chunks 3-3 chunks 4-4 chunks 5-5 chunks 6-6]"
	if got := fmt.Sprint(applied); got != want || w.copied != w.chunks || pos != sp(1000) {
		t.Fatalf("sink writes %s, %d of %d chunks, position %s; want %s committed at 1000", got, w.copied, w.chunks, pos, want)
	}
	if n := countOf(calls, "BeginSnapshot"); n != 1 {
		t.Fatalf("%d snapshots begun, want the copy resumed in the first", n)
	}
}

func countOf(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}
