package tests

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/testkit/localrun"
)

// TestContextColumnsOnlyNamedWithPhaseAndCommitTime proves the metadata-columns paragraph on
// Iceberg: the pipeline names two context columns ({from: commit_ts, as: committed_at} and
// {from: phase, as: source_phase}); the target table has exactly the source's columns and those
// two, under their `as` names (no __op, __pos, __ingest_ts, __snapshot, nor the unrenamed
// __commit_ts or __phase). Backfilled rows carry phase "snapshot" and no commit time; rows of a
// streamed transaction carry phase "stream" and a commit time between the Postgres clock read
// just before the transaction and just after its commit.
func TestContextColumnsOnlyNamedWithPhaseAndCommitTime(t *testing.T) {
	defer parallel(t)()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 500))
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var before, after time.Time
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `BEGIN; `+itemsSeed(1001, 1100)+`; UPDATE public.items SET qty = -1 WHERE id = 1; COMMIT`); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	p.waitEqual("public.items", "raw.items", "id", itemColumns)

	sink := p.icebergSink()
	var names []string
	for _, f := range p.icebergTable(ctx, sink, "raw.items").Schema().Fields() {
		names = append(names, f.Name)
	}
	want := append([]string{"id"}, itemColumns...)
	want = append(want, "committed_at", "source_phase")
	if !slices.Equal(names, want) {
		t.Fatalf("raw.items has columns %v, want exactly %v", names, want)
	}

	got, err := localrun.ScanIceberg(ctx, p.cfg, "raw.items", "id", []string{"id", "committed_at", "source_phase"})
	if err != nil {
		t.Fatal(err)
	}
	streamed := map[string]bool{"1": true}
	for id := 1001; id <= 1100; id++ {
		streamed[strconv.Itoa(id)] = true
	}
	var nSnap, nStream int
	for k, r := range got.Rows {
		ts, phase := r[1], r[2]
		if !streamed[k] {
			nSnap++
			if phase != "snapshot" || ts != "NULL" {
				t.Fatalf("backfilled row %s has source_phase %q committed_at %s; want snapshot and NULL", k, phase, ts)
			}
			continue
		}
		nStream++
		if phase != "stream" {
			t.Fatalf("streamed row %s has source_phase %q, want stream", k, phase)
		}
		at, err := time.Parse("2006-01-02T15:04:05.000000Z", ts)
		if err != nil {
			t.Fatalf("streamed row %s: committed_at %q: %v", k, ts, err)
		}
		if at.Before(before.Truncate(time.Microsecond)) || at.After(after) {
			t.Fatalf("streamed row %s committed_at %s is outside its transaction [%s, %s]", k, at.Format(time.RFC3339Nano),
				before.UTC().Format(time.RFC3339Nano), after.UTC().Format(time.RFC3339Nano))
		}
	}
	if nSnap != 499 || nStream != 101 {
		t.Fatalf("%d backfilled and %d streamed rows, want 499 and 101", nSnap, nStream)
	}
	t.Logf("%s", fmt.Sprintf("transaction window [%s, %s]", before.UTC().Format(time.RFC3339Nano), after.UTC().Format(time.RFC3339Nano)))
}
