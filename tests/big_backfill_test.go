package tests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/workflows"
)

// TestBigBackfillStaysWithinTheHistoryBudget copies a table in 20,000 chunks (five rows each)
// while a writer keeps changing it: the table is backfilled exactly once (one BeginSnapshot over
// all its runs: no restart from zero), every run's history, read from Temporal, stays within the
// budget of 10,000 events, and the sink ends equal to the source key by key.
func TestBigBackfillStaysWithinTheHistoryBudget(t *testing.T) {
	defer parallel(t)()
	const rows, chunkRows, budget = 100_000, 5, 10_000
	p := newPipelineWith(t, pipelineOptions{Tables: []string{"public.items:raw.items"}, ChunkRows: chunkRows,
		SetupSQL: []string{itemsDDL, itemsSeed(1, rows)}})
	p.worker("worker-1")
	start := time.Now()
	p.sluice("start")

	ctx, stopWriter := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var writes writeCount
	wg.Go(func() {
		defer writes.finish()
		for i := 0; ctx.Err() == nil; i++ {
			id := (i*7919)%rows + 1
			err := execSQL(ctx, p.dsn,
				fmt.Sprintf(`UPDATE public.items SET qty = qty + 1, updated = now() WHERE id = %d`, id),
				itemsSeed(rows+1+i, rows+1+i))
			if err != nil {
				return
			}
			writes.add()
			pace(ctx, 20*time.Millisecond)
		}
	})
	err := localrun.WaitFor(context.Background(), "the backfill of 20,000 chunks", 20*time.Minute, 2*time.Second,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, itemsTable, p.started)
			if err != nil {
				return false, "", err
			}
			progress := ""
			if s := st.Backfill; s != nil {
				progress = fmt.Sprintf("%d of ~%d rows, %d chunks", s.Rows, s.EstimatedRows, s.Chunks)
			}
			return st.Phase == "stream" && st.HasPosition, fmt.Sprintf("phase %s %s error %q", st.Phase, progress, st.LastError), nil
		})
	if err != nil {
		stopWriter()
		wg.Wait()
		t.Fatal(err)
	}
	backfilled := time.Since(start)
	writes.waitMore(t, 100, "the writer goes on into the stream")
	stopWriter()
	wg.Wait()
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
	t.Logf("%d rows in chunks of %d backfilled in %s while %d writes ran", rows, chunkRows, backfilled.Round(time.Second), writes.count())

	// Every run of the table's workflow, from Temporal.
	id := workflows.TableWorkflowID(p.name, itemsTable)
	list, err := p.temporal.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = '%s'", id)})
	if err != nil {
		t.Fatal(err)
	}
	begins := 0
	for _, run := range list.GetExecutions() {
		events, largest := 0, 0
		it := p.temporal.GetWorkflowHistory(t.Context(), id, run.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "BeginSnapshot" {
				begins++
			}
			if n := ev.Size(); n > largest {
				largest = n
			}
		}
		t.Logf("run %s: %s, %d events, largest event %d bytes", run.GetExecution().GetRunId(), run.GetStatus(), events, largest)
		if events > budget {
			t.Errorf("run %s holds %d events, over the budget of %d", run.GetExecution().GetRunId(), events, budget)
		}
		if st := run.GetStatus(); st == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED || st == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
			t.Errorf("run %s ended %s", run.GetExecution().GetRunId(), st)
		}
	}
	if begins != 1 {
		t.Errorf("%d snapshots begun over the table's runs, want exactly one (no restart from zero)", begins)
	}
}
