package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/testkit/localrun"
)

// backfillPosition is the snapshot position of the table's latest backfill, as `sluice status`
// shows it: a resync takes a new snapshot, so a new position means the table backfilled again.
func backfillPosition(t *testing.T, p *icebergPipeline, table batch.TableName) batch.SourcePosition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := localrun.TableStatus(ctx, p.temporal, p.name, table, p.started)
	if err != nil {
		t.Fatalf("status of %s: %v", table, err)
	}
	if st.Backfill == nil {
		t.Fatalf("status of %s shows no backfill: %+v", table, st)
	}
	return st.Backfill.Position
}

// TestTableRewritesEverySink rewrites a streaming table's storage on every sink, one pipeline of
// public.items (a plain table) per sink:
//
//   - VACUUM FULL and CLUSTER (new storage, values unchanged): followed without a resync (the
//     table's backfill position stays), the sink equals the source key by key, every column.
//   - ALTER COLUMN qty TYPE int USING qty * 2 (the same type: no schema change in the stream,
//     every row's value rewritten without WAL), with a change after it: seen at the table's
//     RELATION, the table resyncs by itself and the sink equals the source, every column.
//   - ALTER COLUMN qty TYPE bigint USING qty * 3 (a widening that rewrites) with no change
//     after it: seen by the periodic check, the table resyncs and the sink equals the source.
func TestTableRewritesEverySink(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			s := sk.open(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 1000)}})
			s.know([2]int{1, 1000})
			s.p.worker("worker")
			s.p.sluice("start")
			s.p.waitStream(itemsTable)
			s.p.exec(`UPDATE public.items SET qty = coalesce(qty, 0) + 1 WHERE id <= 5`)
			s.waitEqual()
			first := backfillPosition(t, s.p, itemsTable)

			s.p.exec(`VACUUM FULL public.items`, `UPDATE public.items SET name = 'after-vacuum' WHERE id <= 10`,
				`CLUSTER public.items USING items_pkey`, `UPDATE public.items SET name = 'after-cluster' WHERE id BETWEEN 11 AND 20`)
			t.Log("after VACUUM FULL and CLUSTER: waiting for the sink to equal the source")
			s.waitEqual()
			if got := backfillPosition(t, s.p, itemsTable); got != first {
				t.Fatalf("after VACUUM FULL and CLUSTER the table backfilled again (snapshot %s, was %s); a maintenance rewrite changes no value", got, first)
			}

			s.p.exec(`ALTER TABLE public.items ALTER COLUMN qty TYPE int USING coalesce(qty, 0) * 2`,
				`UPDATE public.items SET name = 'after-rewrite' WHERE id = 3`)
			t.Log("after ALTER COLUMN qty TYPE int USING qty * 2: waiting for the sink to equal the source")
			s.waitEqual()
			second := backfillPosition(t, s.p, itemsTable)
			if second == first {
				t.Fatalf("the sink equals the source after ALTER ... TYPE int USING, but the table did not resync")
			}

			s.p.exec(`ALTER TABLE public.items ALTER COLUMN qty TYPE bigint USING qty * 3`)
			t.Log("after ALTER COLUMN qty TYPE bigint USING qty * 3 (no change after it): waiting for the sink to equal the source")
			s.waitEqual()
			if backfillPosition(t, s.p, itemsTable) == second {
				t.Fatalf("the sink equals the source after ALTER ... TYPE bigint USING, but the table did not resync")
			}
		})
	}
}

// TestTableRewriteStops: with tables[].on_rewrite: stop, ALTER COLUMN qty TYPE int USING qty * 2
// stops the table with TableRewritten naming the table, the column, where it was seen and the
// remedy; `sluice resume` is refused, and `sluice resync --table` makes the sink equal again.
func TestTableRewriteStops(t *testing.T) {
	defer parallel(t)()
	s := itemsTarget(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 1000)}, TableYAML: "    on_rewrite: stop\n"}, icebergDestination(t))
	s.p.worker("worker")
	s.p.sluice("start")
	s.p.waitStream(itemsTable)
	s.p.exec(`UPDATE public.items SET qty = coalesce(qty, 0) + 1 WHERE id <= 5`)
	s.waitEqual()
	s.p.exec(`ALTER TABLE public.items ALTER COLUMN qty TYPE int USING coalesce(qty, 0) * 2`,
		`UPDATE public.items SET name = 'after-rewrite' WHERE id = 3`)
	appErr := s.p.waitTableFailed(itemsTable)
	if appErr.Type() != failure.TableRewritten {
		t.Fatalf("the table failed with %s (%v), want %s", appErr.Type(), appErr, failure.TableRewritten)
	}
	for _, want := range []string{"table public.items", "column qty", "seen ", "sluice resync --table public.items", "on_rewrite"} {
		if !strings.Contains(appErr.Error(), want) {
			t.Errorf("the table's error does not say %q: %v", want, appErr)
		}
	}
	if out, err := s.p.sluiceFails("resume", "--table", "public.items"); err == nil || !strings.Contains(err.Error()+out, "sluice resync --table public.items") {
		t.Fatalf("sluice resume after a rewrite: err %v, output %q; want a refusal naming sluice resync", err, out)
	}
	s.p.started = time.Now().Add(-time.Second)
	s.p.sluice("resync", "--table", "public.items")
	s.waitEqual()
}

// reattachItemsLow detaches public.items_low, changes rows in it while it is detached (the WAL
// never carries those as changes of public.items) and attaches it again, in quick succession:
// between two periodic checks.
func reattachItemsLow(p *icebergPipeline, tag string) {
	p.exec(`ALTER TABLE public.items DETACH PARTITION public.items_low`,
		`UPDATE public.items_low SET qty = -7, name = '`+tag+`' WHERE id <= 20`,
		`DELETE FROM public.items_low WHERE id BETWEEN 30 AND 32`,
		`INSERT INTO public.items_low (id, name, qty) VALUES (990, '`+tag+`', 1) ON CONFLICT (id) DO UPDATE SET name = excluded.name`,
		`ALTER TABLE public.items ATTACH PARTITION public.items_low FOR VALUES FROM (MINVALUE) TO (1000)`)
}

// TestPartitionReattachedEverySink detaches a partition of public.items (partitioned), changes
// its rows and attaches it again, on every sink: once while streaming, between two periodic
// checks, and once while no worker runs. Each time the table resyncs by itself (the partition's
// pg_inherits row is new) and the sink equals the source key by key, every column.
func TestPartitionReattachedEverySink(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			s := sk.open(t, pipelineOptions{SetupSQL: partitionChangeDDL})
			s.know([2]int{1, 1500})
			w := s.p.worker("worker")
			s.p.sluice("start")
			s.p.waitStream(itemsTable)
			s.p.exec(`UPDATE public.items SET qty = -1 WHERE id <= 5`)
			s.waitEqual()

			reattachItemsLow(s.p, "while-streaming")
			s.p.exec(`UPDATE public.items SET qty = -2 WHERE id BETWEEN 1000 AND 1005`)
			t.Log("after a detach, changes and an attach while streaming: waiting for the sink to equal the source")
			s.waitEqual()

			if err := w.Stop(); err != nil {
				t.Fatal(err)
			}
			reattachItemsLow(s.p, "while-stopped")
			s.p.worker("worker-2")
			t.Log("after a detach, changes and an attach while no worker ran: waiting for the sink to equal the source")
			s.waitEqual()
		})
	}
}
