package tests

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
	"github.com/sluicecdc/sluice/workflows"
)

// manyTables is the size of TestManyTablesOnTenReplicationSlots: tables of manyColumns columns
// (the key and 39 of mixed types) with manyRows rows each.
const (
	manyTables  = 500
	manyColumns = 40
	manyRows    = 4
	// manySlots is max_replication_slots and max_wal_senders of the test's server: Postgres'
	// defaults.
	manySlots = 10
)

// TestManyTablesOnTenReplicationSlots runs one pipeline of 500 tables of 40 columns on a
// Postgres with max_replication_slots = 10 and max_wal_senders = 10 (the defaults): it starts,
// backfills every table, and streams changes (one transaction updating every table, then inserts
// and deletes in each) until every table's sink equals its source key by key. The server never
// holds more than 10 slots (polled), never refuses a slot, a walsender or a connection (its log),
// no table run fails, and every run's history, read from Temporal, stays within the budget of
// workflows/budget.go. It logs how long each phase took.
func TestManyTablesOnTenReplicationSlots(t *testing.T) {
	defer parallelHeavy(t)()
	pg := testenv.PrivatePostgres(t, fmt.Sprintf("max_replication_slots=%d", manySlots), fmt.Sprintf("max_wal_senders=%d", manySlots))
	specs := make([]string, manyTables)
	for i := range specs {
		specs[i] = fmt.Sprintf("public.%s:raw.%s", manyTableName(i), manyTableName(i))
	}
	prepStart := time.Now()
	p := newPipelineWith(t, pipelineOptions{DSN: pg.DSN, Tables: specs, SetupSQL: manyTablesSQL(), MaxWait: "1s"})
	prep := time.Since(prepStart)

	peaks := watchReplication(t, pg.DSN)
	p.worker("worker-1")
	start := time.Now()
	p.sluice("start")
	refused := func() string { return serverRefusals(t, pg.Log) }
	p.waitCount("every table's workflow to start", fmt.Sprintf("WorkflowType = '%s'", workflows.TableWorkflowType), 3*time.Minute, refused)
	setup := time.Since(start)
	p.waitCount("every table to finish its backfill", fmt.Sprintf("WorkflowType = '%s' AND %s = '%s' AND ExecutionStatus = 'Running'",
		workflows.TableWorkflowType, workflows.SearchPhase.GetName(), workflows.StateStream), 10*time.Minute, refused)
	backfill := time.Since(start)

	changeStart := time.Now()
	p.exec(manyTablesChanges()...)
	p.waitAllEqual(5 * time.Minute)
	catchUp := time.Since(changeStart)
	slots, senders := peaks()

	t.Logf("%d tables of %d columns, %d rows each: source tables created in %s; from `sluice start`: every table workflow started after %s, every table streaming after %s; changes to every table caught up in %s",
		manyTables, manyColumns, manyRows, prep.Round(time.Millisecond), setup.Round(time.Millisecond), backfill.Round(time.Millisecond), catchUp.Round(time.Millisecond))
	t.Logf("peak replication slots in use %d, walsenders %d (max_replication_slots = max_wal_senders = %d)", slots, senders, manySlots)
	if slots > manySlots {
		t.Errorf("%d replication slots in use at once, over max_replication_slots = %d", slots, manySlots)
	}
	if r := refused(); r != "" {
		t.Error(r)
	}
	p.checkHistories()
}

// manyTableName is the name of the i-th table.
func manyTableName(i int) string { return fmt.Sprintf("t%03d", i+1) }

// manyColumnTypes are the types of the value columns, in turn.
var manyColumnTypes = []string{"int", "bigint", "text", "numeric(12,2)", "timestamptz", "boolean", "date", "text[]"}

// manyValue is the SQL of value column k (1-based) of row id (an SQL expression), version v:
// NULL now and then, else a value of the column's type that depends on all three.
func manyValue(k int, id string, v int) string {
	n := fmt.Sprintf("(%s * %d + %d)", id, k, v)
	var e string
	switch manyColumnTypes[(k-1)%len(manyColumnTypes)] {
	case "int":
		e = n + " % 100000"
	case "bigint":
		e = n + " * 1000003"
	case "text":
		e = fmt.Sprintf("'v%d-' || %s", v, n)
	case "numeric(12,2)":
		e = n + " / 7.0"
	case "timestamptz":
		e = fmt.Sprintf("'2026-01-01 00:00:00+00'::timestamptz + (%s || ' minutes')::interval", n)
	case "boolean":
		e = n + " % 2 = 0"
	case "date":
		e = fmt.Sprintf("'2026-01-01'::date + (%s %% 3000)::int", n)
	case "text[]":
		e = fmt.Sprintf("ARRAY['a' || %s, 'b%d']", n, v)
	}
	return fmt.Sprintf("CASE WHEN (%s + %d) %% 11 = 0 THEN NULL ELSE %s END", id, k+v, e)
}

// manyColumnNames are the value columns c01..c39.
func manyColumnNames() []string {
	cols := make([]string, manyColumns-1)
	for k := range cols {
		cols[k] = fmt.Sprintf("c%02d", k+1)
	}
	return cols
}

// manyTablesSQL creates and fills the tables, 50 to a statement.
func manyTablesSQL() []string {
	cols := manyColumnNames()
	var defs, vals []string
	for k, c := range cols {
		defs = append(defs, c+" "+manyColumnTypes[k%len(manyColumnTypes)])
		vals = append(vals, manyValue(k+1, "g", 0))
	}
	var out []string
	var b strings.Builder
	for i := range manyTables {
		name := "public." + manyTableName(i)
		fmt.Fprintf(&b, "CREATE TABLE %s (id bigint PRIMARY KEY, %s);\n", name, strings.Join(defs, ", "))
		fmt.Fprintf(&b, "INSERT INTO %s (id, %s) SELECT g, %s FROM generate_series(1, %d) g;\n", name, strings.Join(cols, ", "), strings.Join(vals, ", "), manyRows)
		if (i+1)%50 == 0 || i == manyTables-1 {
			out = append(out, b.String())
			b.Reset()
		}
	}
	return out
}

// manyTablesChanges changes every table: one transaction updates row 1 of every table (every
// column), then each table gets a new row and loses row 2 in transactions of 50 tables.
func manyTablesChanges() []string {
	cols := manyColumnNames()
	var set, vals []string
	for k, c := range cols {
		set = append(set, fmt.Sprintf("%s = %s", c, manyValue(k+1, "id", 1)))
		vals = append(vals, manyValue(k+1, "g", 2))
	}
	var update strings.Builder
	update.WriteString("BEGIN;\n")
	for i := range manyTables {
		fmt.Fprintf(&update, "UPDATE public.%s SET %s WHERE id = 1;\n", manyTableName(i), strings.Join(set, ", "))
	}
	update.WriteString("COMMIT;")
	out := []string{update.String()}
	var b strings.Builder
	for i := range manyTables {
		name := "public." + manyTableName(i)
		fmt.Fprintf(&b, "INSERT INTO %s (id, %s) SELECT g, %s FROM generate_series(%d, %d) g;\n", name, strings.Join(cols, ", "), strings.Join(vals, ", "), manyRows+1, manyRows+1)
		fmt.Fprintf(&b, "DELETE FROM %s WHERE id = 2;\n", name)
		if (i+1)%50 == 0 || i == manyTables-1 {
			out = append(out, "BEGIN;\n"+b.String()+"COMMIT;")
			b.Reset()
		}
	}
	return out
}

// watchReplication polls the server's replication slots and walsenders until the test ends and
// returns a function that reports the most of each seen in use at once so far.
func watchReplication(t *testing.T, dsn string) func() (slots, senders int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var slots, senders int
	var wg sync.WaitGroup
	wg.Go(func() {
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			var s, w int
			err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots)::int, (SELECT count(*) FROM pg_stat_replication)::int`).Scan(&s, &w)
			if err == nil {
				mu.Lock()
				slots, senders = max(slots, s), max(senders, w)
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return slots, senders
	}
}

// waitCount waits until visibility counts every table of the pipeline in a workflow that
// matches query; it fails at once when refused reports something.
func (p *icebergPipeline) waitCount(what, query string, timeout time.Duration, refused func() string) {
	p.t.Helper()
	q := fmt.Sprintf("%s = '%s' AND %s", workflows.SearchPipeline.GetName(), p.name, query)
	err := localrun.WaitFor(context.Background(), what, timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		if r := refused(); r != "" {
			p.t.Fatalf("while waiting for %s: %s", what, r)
		}
		resp, err := p.temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: q})
		if err != nil {
			return false, "", err
		}
		return resp.GetCount() >= manyTables, fmt.Sprintf("%d of %d tables", resp.GetCount(), manyTables), nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
}

// waitAllEqual waits until every table's sink equals its source key by key, every column.
func (p *icebergPipeline) waitAllEqual(timeout time.Duration) {
	p.t.Helper()
	cols := manyColumnNames()
	pending := make([]int, manyTables)
	for i := range pending {
		pending[i] = i
	}
	diffs := map[int][]string{}
	err := localrun.WaitFor(context.Background(), "every table's sink to equal its source", timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		var left []int
		for _, i := range pending {
			name := manyTableName(i)
			src, err := sourceDBs.Scan(ctx, p.dsn, "public."+name, "id", cols)
			if err != nil {
				return false, "", err
			}
			got, err := localrun.ScanIceberg(ctx, p.cfg, "raw."+name, "id", append([]string{"id"}, cols...))
			if err != nil {
				return false, "", err
			}
			sink := localrun.Table{Columns: cols, Rows: map[string][]string{}}
			for k, r := range got.Rows {
				sink.Rows[k] = r[1:]
			}
			if d := localrun.Diff(src, sink, 3); len(d) > 0 {
				diffs[i] = d
				left = append(left, i)
			}
		}
		pending = left
		if len(left) == 0 {
			return true, "", nil
		}
		return false, fmt.Sprintf("%d tables differ, first %s: %s", len(left), manyTableName(left[0]), strings.Join(diffs[left[0]], "; ")), nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
}

// serverRefusals reports how often the server's log says it refused a replication slot, a
// walsender or a connection (a backfill or a reader that found no room); empty when never.
func serverRefusals(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the server log: %v", err)
	}
	var out []string
	for _, refusal := range []string{
		"all replication slots are in use",
		"number of requested standby connections exceeds max_wal_senders",
		"too many clients already",
		"remaining connection slots are reserved",
	} {
		if n := strings.Count(string(b), refusal); n > 0 {
			out = append(out, fmt.Sprintf("%d times %q", n, refusal))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "the server refused " + strings.Join(out, ", ") + " (log " + path + ")"
}

// checkHistories reads from Temporal every run of the pipeline's SourceWorkflow and the current
// run of every table's workflow: no run failed or was terminated, and each stays within
// workflows.MaxRunEvents events and workflows.MaxPayloadBytes per event.
func (p *icebergPipeline) checkHistories() {
	p.t.Helper()
	ctx := p.t.Context()
	bad, err := p.temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: fmt.Sprintf(
		"%s = '%s' AND ExecutionStatus IN ('Failed', 'Terminated', 'TimedOut')", workflows.SearchPipeline.GetName(), p.name)})
	if err != nil {
		p.t.Fatal(err)
	}
	if bad.GetCount() > 0 {
		p.t.Errorf("%d runs of the pipeline failed, were terminated or timed out", bad.GetCount())
	}
	type run struct{ id, runID string }
	runs := []run{}
	list, err := p.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", workflows.SourceWorkflowID(p.name))})
	if err != nil {
		p.t.Fatal(err)
	}
	for _, e := range list.GetExecutions() {
		runs = append(runs, run{workflows.SourceWorkflowID(p.name), e.GetExecution().GetRunId()})
	}
	for i := range manyTables {
		runs = append(runs, run{workflows.TableWorkflowID(p.name, batch.TableName{Schema: "public", Name: manyTableName(i)}), ""})
	}
	var tableEvents []int
	tableLargest, tableLargestAt := 0, ""
	for _, r := range runs {
		events, largest, kind := 0, 0, ""
		it := p.temporal.GetWorkflowHistory(ctx, r.id, r.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				p.t.Fatalf("reading the history of %s: %v", r.id, err)
			}
			events++
			if n := ev.Size(); n > largest {
				largest, kind = n, ev.GetEventType().String()
			}
		}
		if events > workflows.MaxRunEvents {
			p.t.Errorf("%s run %q holds %d events, over the budget of %d", r.id, r.runID, events, workflows.MaxRunEvents)
		}
		if largest > workflows.MaxPayloadBytes {
			p.t.Errorf("%s run %q has an event of %d bytes (%s), over the budget of %d", r.id, r.runID, largest, kind, workflows.MaxPayloadBytes)
		}
		if r.runID != "" {
			p.t.Logf("%s run %s: %d events, largest event %d bytes (%s)", r.id, r.runID, events, largest, kind)
			continue
		}
		tableEvents = append(tableEvents, events)
		if largest > tableLargest {
			tableLargest, tableLargestAt = largest, r.id+" "+kind
		}
	}
	slices.Sort(tableEvents)
	p.t.Logf("table workflows' current runs: %d to %d events (median %d), largest event %d bytes (%s)",
		tableEvents[0], tableEvents[len(tableEvents)-1], tableEvents[len(tableEvents)/2], tableLargest, tableLargestAt)
}
