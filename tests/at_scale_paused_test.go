package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/workflows"
)

// TestPausedTableCatchesUpWithinBudget is the outage/pause acceptance of the history budget:
// public.a is paused while one UPDATE of its 100,000 rows is staged at batch.max_rows 5 (20,000
// batches, each signalled to its paused workflow). While they are staged the slot's confirmed
// position stays before the UPDATE; then public.b streams and its target follows its source
// while public.a stays paused with its backlog. After resume public.a catches up (in grouped
// commits) and equals its source key by key; no run of its workflow was terminated or failed,
// and every run's history, read from Temporal, stays under workflows.MaxRunEvents.
func TestPausedTableCatchesUpWithinBudget(t *testing.T) {
	defer parallelHeavy(t)()
	const rows, wantBatches = 100_000, 20_000
	ctx := context.Background()
	p := newPipelineWith(t, pipelineOptions{Tables: []string{"public.a:raw.a", "public.b:raw.b"}, SetupSQL: []string{
		`CREATE TABLE public.a (id bigint PRIMARY KEY, name text NOT NULL, qty int)`,
		fmt.Sprintf(`INSERT INTO public.a SELECT g, 'a-' || g, g %% 97 FROM generate_series(1, %d) g`, rows),
		`CREATE TABLE public.b (id bigint PRIMARY KEY, name text NOT NULL, qty int)`,
		`INSERT INTO public.b SELECT g, 'b-' || g, g % 97 FROM generate_series(1, 100) g`,
	}})
	// Batches of five rows, so one UPDATE of public.a stages 20,000 of them.
	cfg, err := os.ReadFile(p.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.config, bytes.Replace(cfg, []byte("max_rows: 5000"), []byte("max_rows: 5"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	p.worker("worker-1")
	p.sluice("start")
	p.waitStream(tableA)
	p.waitStream(tableB)
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)

	p.sluice("pause", "--table", "public.a")
	err = localrun.WaitFor(ctx, "public.a to be paused", 2*time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, tableA, p.started)
			return err == nil && st.Paused, fmt.Sprintf("%+v", st), err
		})
	if err != nil {
		t.Fatal(err)
	}

	aAtPause, err := localrun.TableStatus(ctx, p.temporal, p.name, tableA, p.started)
	if err != nil {
		t.Fatal(err)
	}
	p.exec(`UPDATE public.a SET qty = qty + 1, name = name || '+'`)
	held := p.currentLSN(ctx) // past the UPDATE's commit: the slot must not confirm it
	slot := p.cfg.Source.Slot
	staged := filepath.Join(p.dir, "staging", p.name, "public.a")
	stageStart := time.Now()
	// The reader stages and signals batches one at a time: about 30 a second on a loaded
	// two-core machine, so the staging dominates the test's time.
	err = localrun.WaitFor(ctx, "20,000 batches of public.a to be staged", 20*time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			if confirmed, _ := slotState(ctx, t, p.dsn, slot); confirmed >= held {
				return false, "", fmt.Errorf("the slot confirmed %X, past the paused table's uncommitted UPDATE (committed before %X)", confirmed, held)
			}
			n := stagedFiles(t, staged)
			return n >= wantBatches, fmt.Sprintf("%d staged", n), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d batches of public.a staged in %s", stagedFiles(t, staged), time.Since(stageStart).Round(time.Second))

	// public.b streams while public.a is paused with its backlog: a transaction every 100 ms for
	// 15 seconds, which reach raw.b while public.a stays paused.
	bAtPause, err := localrun.TableStatus(ctx, p.temporal, p.name, tableB, p.started)
	if err != nil {
		t.Fatal(err)
	}
	writes := 0
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); writes++ {
		p.exec(fmt.Sprintf(`INSERT INTO public.b VALUES (%d, 'live-%[1]d', %[1]d)`, 1000+writes),
			fmt.Sprintf(`UPDATE public.b SET qty = qty + 1 WHERE id = %d`, 1+writes%100))
		pace(ctx, 100*time.Millisecond)
	}
	p.waitEqual("public.b", "raw.b", "id", twoTableColumns)
	bStreamed, err := localrun.TableStatus(ctx, p.temporal, p.name, tableB, p.started)
	if err != nil {
		t.Fatal(err)
	}
	aPaused, err := localrun.TableStatus(ctx, p.temporal, p.name, tableA, p.started)
	if err != nil {
		t.Fatal(err)
	}
	// The staged files are the queue; the status' queue length is as the workflow last saw it.
	if n := stagedFiles(t, staged); !aPaused.Paused || aPaused.Batches != aAtPause.Batches || n < wantBatches {
		t.Fatalf("public.a while paused: %+v with %d staged files; want paused, no batch committed, at least %d staged", aPaused, n, wantBatches)
	}
	if confirmed, _ := slotState(ctx, t, p.dsn, slot); confirmed >= held {
		t.Fatalf("the slot confirmed %X, past the paused table's uncommitted UPDATE (committed before %X)", confirmed, held)
	}
	if bStreamed.Batches <= bAtPause.Batches {
		t.Errorf("public.b committed no batch while public.a was paused with its backlog (%d before, %d after)", bAtPause.Batches, bStreamed.Batches)
	}
	t.Logf("while public.a was paused with %d batches queued, public.b committed %d batches of %d transactions and equals its source",
		aPaused.QueueLength, bStreamed.Batches-bAtPause.Batches, writes)

	p.sluice("resume", "--table", "public.a")
	resumed := time.Now()
	err = localrun.WaitFor(ctx, "public.a to catch up", 10*time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, tableA, p.started)
			if err != nil {
				return false, "", err
			}
			return st.QueueLength == 0 && st.LagBytes == 0 && stagedFiles(t, staged) == 0,
				fmt.Sprintf("%d batches committed, %d queued, lag %d B, error %q", st.Batches, st.QueueLength, st.LagBytes, st.LastError), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	caughtUp := time.Since(resumed)
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)
	aDone, err := localrun.TableStatus(ctx, p.temporal, p.name, tableA, p.started)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("public.a caught up %d batches in %s after resume (%d batches committed in all)",
		aDone.Batches-aPaused.Batches, caughtUp.Round(time.Second), aDone.Batches)

	// Every run of public.a's workflow, from Temporal.
	id := workflows.TableWorkflowID(p.name, tableA)
	var runs, events, maxEvents, commits, largest int
	var maxBytes int64
	var token []byte
	for {
		list, err := p.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = '%s'", id), NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range list.GetExecutions() {
			runID := run.GetExecution().GetRunId()
			desc, err := p.temporal.DescribeWorkflowExecution(ctx, id, runID)
			if err != nil {
				t.Fatal(err)
			}
			info := desc.GetWorkflowExecutionInfo()
			n := int(info.GetHistoryLength())
			if n > workflows.MaxRunEvents {
				t.Errorf("run %s holds %d events, over the budget of %d", runID, n, workflows.MaxRunEvents)
			}
			if st := info.GetStatus(); st == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED || st == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED ||
				st == enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT {
				t.Errorf("run %s ended %s", runID, st)
			}
			runs, events, maxEvents, maxBytes = runs+1, events+n, max(maxEvents, n), max(maxBytes, info.GetHistorySizeBytes())
			it := p.temporal.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "CommitBatch" {
					commits++
				}
				largest = max(largest, ev.Size())
			}
		}
		if token = list.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if runs == 0 {
		t.Fatalf("no runs of %s listed", id)
	}
	t.Logf("%s: %d runs, %d events in all (%.2f per committed batch), at most %d events and %d history bytes in a run, %d CommitBatch activities, largest event %d bytes",
		id, runs, events, float64(events)/float64(max(aDone.Batches, 1)), maxEvents, maxBytes, commits, largest)
	if maxBytes > workflows.MaxRunHistoryBytes {
		t.Errorf("a run of %d history bytes: over the budget of %d", maxBytes, workflows.MaxRunHistoryBytes)
	}
	if largest > workflows.MaxPayloadBytes {
		t.Errorf("an event of %d bytes: over the payload budget of %d", largest, workflows.MaxPayloadBytes)
	}
}

// stagedFiles counts the staged batch files under dir.
func stagedFiles(t *testing.T, dir string) int {
	t.Helper()
	n, err := countFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
