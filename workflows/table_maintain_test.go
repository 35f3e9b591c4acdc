package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/failure"
)

// onMaintain mocks MaintainTable: each call is recorded in w.applied as "maintain@<sink LSN>" and
// answered by fail (nil: success).
func onMaintain(env *testsuite.TestWorkflowEnvironment, w *world, fail func() error) {
	env.OnActivity(commitActs.MaintainTable, mock.Anything, mock.Anything).After(time.Second).Return(
		func(context.Context, activities.TableConfig) (activities.MaintainResult, error) {
			w.call("MaintainTable")
			w.mu.Lock()
			defer w.mu.Unlock()
			w.applied = append(w.applied, fmt.Sprintf("maintain@%d", w.pos.Position.LSN))
			if fail != nil {
				if err := fail(); err != nil {
					return activities.MaintainResult{}, err
				}
			}
			return activities.MaintainResult{Supported: true, Message: "maintained raw.orders"}, nil
		})
}

func TestTableWorkflowMaintainsEveryNWrittenBatches(t *testing.T) {
	t.Parallel()
	// 12..18 is covered once 10..19 is in: skipped, so it does not count toward maintenance.
	w := newWorld(true, 5, ref(10, 19), ref(12, 18), ref(20, 29), ref(30, 39), ref(40, 49), ref(50, 59))
	env := newEnv(t, w, time.Second)
	onMaintain(env, w, nil)
	var st TableStatus
	env.RegisterDelayedCallback(func() { st = queryStatus(t, env) }, time.Hour-time.Second)

	in := TableInput{TableConfig: testTable, Options: TableOptions{MaintainEveryCommits: 2, CommitGroupRefs: 1}}
	if err := finish(t, env, in, time.Hour); !temporal.IsCanceledError(err) {
		t.Fatalf("workflow ended with %v", err)
	}
	applied, _, _ := w.snapshotOf()
	want := []string{"10..19", "20..29", "maintain@29", "30..39", "40..49", "maintain@49", "50..59"}
	if !equalStrings(applied, want) {
		t.Fatalf("sink saw %v, want %v: maintenance after every 2 batches that wrote", applied, want)
	}
	lm := st.LastMaintenance
	if lm == nil || lm.Result == nil || !lm.Result.Supported || lm.Error != "" || lm.Batches != 5 || !lm.Finished.After(lm.Started) {
		t.Fatalf("status last_maintenance = %+v, want the second run's result (started after 5 batches)", lm)
	}
}

func TestTableWorkflowMaintenanceCountSurvivesContinueAsNew(t *testing.T) {
	t.Parallel()
	w := newWorld(true, 5, ref(10, 19), ref(20, 29), ref(30, 39), ref(40, 49), ref(50, 59))
	env := newEnv(t, w, time.Second)
	onMaintain(env, w, nil)
	in := TableInput{TableConfig: testTable, Options: TableOptions{MaxCommitsPerRun: 3, MaintainEveryCommits: 2, CommitGroupRefs: 1}}

	err := finish(t, env, in, 0)
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new after 3 commits", err)
	}
	var next TableInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil || next.State.SinceMaintenance != 1 || next.State.LastMaintenance == nil ||
		next.Options.MaintainEveryCommits != 2 {
		t.Fatalf("carried input %+v (state %+v): want 1 batch since the maintenance, its status, the option", next, next.State)
	}

	// The next run maintains after one more batch: 30..39 and 40..49 make two.
	next.Options.MaxCommitsPerRun = 100
	env = newEnv(t, w, time.Second)
	onMaintain(env, w, nil)
	if err := finish(t, env, next, time.Hour); !temporal.IsCanceledError(err) {
		t.Fatalf("continued run ended with %v", err)
	}
	applied, _, _ := w.snapshotOf()
	want := []string{"10..19", "20..29", "maintain@29", "30..39", "40..49", "maintain@49", "50..59"}
	if !equalStrings(applied, want) {
		t.Fatalf("sink saw %v, want %v", applied, want)
	}
}

func TestTableWorkflowFailingMaintenanceDoesNotStopCommits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		err          error
		wantAttempts int    // per maintenance
		wantInError  string // in status last_maintenance.error
	}{
		{name: "transient failure retried a bounded number of times", err: errors.New("catalog unreachable"),
			wantAttempts: MaintainAttempts, wantInError: "catalog unreachable"},
		{name: "non-retryable failure tried once", err: temporal.NewNonRetryableApplicationError(
			"maintenance of raw.orders failed: manifest unreadable", failure.MaintenanceFailed, nil),
			wantAttempts: 1, wantInError: "manifest unreadable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(true, 5, ref(10, 19), ref(20, 29), ref(30, 39))
			env := newEnv(t, w, time.Second)
			onMaintain(env, w, func() error { return tt.err })
			var st TableStatus
			env.RegisterDelayedCallback(func() { st = queryStatus(t, env) }, time.Hour-time.Second)

			in := TableInput{TableConfig: testTable, Options: TableOptions{MaintainEveryCommits: 1, CommitGroupRefs: 1}}
			if err := finish(t, env, in, time.Hour); !temporal.IsCanceledError(err) {
				t.Fatalf("workflow ended with %v, want only the test's cancellation", err)
			}
			applied, calls, pos := w.snapshotOf()
			var commits []string
			for _, a := range applied {
				if !strings.HasPrefix(a, "maintain") {
					commits = append(commits, a)
				}
			}
			if want := []string{"10..19", "20..29", "30..39"}; !equalStrings(commits, want) || pos != sp(39) {
				t.Fatalf("committed %v with the sink at %s, want %v: commits go on after failed maintenance", commits, pos, want)
			}
			if n := strings.Count(strings.Join(calls, " "), "MaintainTable"); n != 3*tt.wantAttempts {
				t.Errorf("MaintainTable ran %d times, want %d (3 maintenances of %d attempts)", n, 3*tt.wantAttempts, tt.wantAttempts)
			}
			lm := st.LastMaintenance
			if st.Phase != StateStream || lm == nil || lm.Result != nil || !strings.Contains(lm.Error, tt.wantInError) {
				t.Fatalf("status phase %s, last_maintenance %+v: want phase stream and the failure's cause", st.Phase, lm)
			}
			if st.LastError != "" {
				t.Errorf("a maintenance failure shows as the table's last error %q", st.LastError)
			}
		})
	}
}
