package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
	"github.com/sluicecdc/sluice/workflows"
)

var itemsTable = batch.TableName{Schema: "public", Name: "items"}

var itemColumns = []string{"name", "qty", "price", "tags", "updated"}

// itemsDDL is the table most end-to-end tests replicate. Every sink is compared on every column;
// ClickHouse through the losses docs/types.md documents (clickhouseStored).
const itemsDDL = `CREATE TABLE public.items (
	id      bigint PRIMARY KEY,
	name    text NOT NULL,
	qty     int,
	price   numeric(10,2),
	tags    text[],
	updated timestamptz NOT NULL DEFAULT now()
)`

func itemsSeed(from, to int) string {
	return fmt.Sprintf(`INSERT INTO public.items (id, name, qty, price, tags, updated)
		SELECT g, 'item-' || g, g %% 97, (g %% 1000) / 7.0, ARRAY['t' || (g %% 5)], '2026-01-01'::timestamptz + (g || ' seconds')::interval
		FROM generate_series(%d, %d) g`, from, to)
}

// liveItemChanges are inserts, updates, deletes, a key change and a delete-then-reinsert.
var liveItemChanges = []string{
	itemsSeed(200001, 200500),
	`UPDATE public.items SET qty = qty + 1000, tags = tags || '{live}' WHERE id % 50 = 0`,
	`DELETE FROM public.items WHERE id BETWEEN 100 AND 299`,
	`UPDATE public.items SET id = 900000, name = 'moved' WHERE id = 7`,
	`DELETE FROM public.items WHERE id = 11`,
	`INSERT INTO public.items (id, name, qty) VALUES (11, 'reborn', NULL)`,
	`BEGIN; UPDATE public.items SET name = 'txn-a' WHERE id = 12; UPDATE public.items SET name = 'txn-b' WHERE id = 12; DELETE FROM public.items WHERE id = 13; COMMIT`,
}

// TestStarterAndTemporalCLIReplicateIdentically starts one pipeline with `sluice start` and
// another on the same source table with `temporal workflow start` and the JSON input the README
// documents; after a 100,000-row backfill and live inserts, updates, deletes and key changes both
// Iceberg tables equal the source key by key, and the deletes were written as equality deletes.
func TestStarterAndTemporalCLIReplicateIdentically(t *testing.T) {
	defer parallel(t)()
	a := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 100000))
	b := newIcebergPipeline(t, a.dsn, []string{"public.items:lake.items"})
	a.worker("worker-a")
	b.worker("worker-b")

	out := a.sluice("start")
	t.Logf("sluice start:\n%s", out)

	input, err := json.Marshal(pipeline.SourceInput(b.cfg))
	if err != nil {
		t.Fatal(err)
	}
	temporalCLI := filepath.Join(devstack.DefaultCache(), "bin", "temporal")
	if _, err := localrun.Run(context.Background(), temporalCLI, nil, "workflow", "start", "--address", testenv.Temporal(t),
		"--task-queue", b.cfg.Temporal.TaskQueue, "--type", workflows.SourceWorkflowType,
		"--workflow-id", workflows.SourceWorkflowID(b.name), "--input", string(input)); err != nil {
		t.Fatal(err)
	}

	a.waitStream(itemsTable)
	b.waitStream(itemsTable)
	a.exec(liveItemChanges...)
	ra := a.waitEqual("public.items", "raw.items", "id", itemColumns)
	rb := b.waitEqual("public.items", "lake.items", "id", itemColumns)
	if diff := localrun.Diff(ra, rb, 5); len(diff) > 0 {
		t.Fatalf("the two pipelines differ: %v", diff)
	}
	// 100,000 seeded, 500 inserted live, 200 deleted by range, one deleted in the last transaction.
	if want := 100000 + 500 - 200 - 1; len(ra.Rows) != want {
		t.Fatalf("sink holds %d rows, want %d", len(ra.Rows), want)
	}
	// The deletes and updates reached Iceberg as equality deletes (merge-on-read).
	files, err := localrun.IcebergFiles(context.Background(), a.cfg, "raw.items")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("raw.items files: %+v", files)
	if files.EqualityDeleteFiles == 0 {
		t.Fatalf("no equality delete files in raw.items after live deletes and updates: %+v", files)
	}

	status := a.sluice("status")
	t.Logf("sluice status:\n%s", status)
	st, err := localrun.TableStatus(context.Background(), a.temporal, a.name, itemsTable, a.started)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"public.items", "stream", "Running", st.Position.Position.String()} {
		if !strings.Contains(status, want) {
			t.Errorf("sluice status does not show %q:\n%s", want, status)
		}
	}
	// What the Web UI lists and filters on: the table's search attributes.
	desc, err := a.temporal.DescribeWorkflowExecution(context.Background(), workflows.TableWorkflowID(a.name, itemsTable), "")
	if err != nil {
		t.Fatal(err)
	}
	attrs := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	for key, want := range map[string]string{"SluicePipeline": a.name, "SluiceTable": "public.items", "SluicePhase": "stream"} {
		var got string
		if p, ok := attrs[key]; !ok || json.Unmarshal(p.GetData(), &got) != nil || got != want {
			t.Errorf("search attribute %s = %q, want %q", key, got, want)
		}
	}
}

// TestWorkerKilledMidCommitLosesNothing runs two workers on one pipeline under a steady stream
// of writes and SIGKILLs one of them repeatedly; the Iceberg table still equals the source.
func TestWorkerKilledMidCommitLosesNothing(t *testing.T) {
	defer parallel(t)()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 20000))
	writeWhileKillingWorkers(t, p)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
}

// killWrites are the writes of writeWhileKillingWorkers: ids they insert lie in
// [killInsertFrom, killInsertTo].
const killInsertFrom, killInsertTo = 100000, 103999

// killRounds is the rounds writeWhileKillingWorkers writes (100 inserts each, killInsertFrom on);
// it kills the worker after each quarter of them.
const killRounds = 40

// writeWhileKillingWorkers starts two workers and the pipeline, waits for the backfill, then
// writes killRounds rounds of inserts, updates and deletes while SIGKILLing one worker three
// times, after each quarter of the rounds (restarting it each time), and returns when the writes
// are done.
func writeWhileKillingWorkers(t *testing.T, p *icebergPipeline) {
	t.Helper()
	p.worker("worker-1")
	victim := p.worker("worker-2")
	p.sluice("start")
	p.waitStream(itemsTable)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	var written writeCount
	go func() {
		defer written.finish()
		var err error
		for i := 0; i < killRounds && err == nil && ctx.Err() == nil; i++ {
			err = execSQL(ctx, p.dsn,
				itemsSeed(killInsertFrom+i*100, killInsertFrom+i*100+99),
				fmt.Sprintf(`UPDATE public.items SET qty = qty + 1 WHERE id %% 40 = %d`, i),
				fmt.Sprintf(`DELETE FROM public.items WHERE id BETWEEN %d AND %d`, 1000+i*50, 1000+i*50+9))
			if err == nil {
				written.add()
			}
			pace(ctx, 100*time.Millisecond)
		}
		done <- err
	}()
	for i := 0; i < 3; i++ {
		written.waitFor(t, int64(i+1)*killRounds/4, "a kill while the rounds are written")
		if err := victim.Kill(); err != nil {
			t.Fatal(err)
		}
		t.Logf("killed worker %d", victim.PID())
		victim = p.worker(fmt.Sprintf("worker-2-restart-%d", i))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
