package tests

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// slotState reads the pipeline slot's confirmed_flush_lsn and the server's current WAL position.
func slotState(ctx context.Context, t *testing.T, dsn, slot string) (confirmed, current uint64) {
	t.Helper()
	err := sourceDBs.QueryRow(ctx, dsn, `SELECT pg_wal_lsn_diff(confirmed_flush_lsn, '0/0')::bigint, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, []any{slot}, &confirmed, &current)
	if err != nil {
		t.Fatalf("reading slot %s: %v", slot, err)
	}
	return confirmed, current
}

// TestSlotHoldsUncommittedAndQuietPipelineReleasesWAL checks the two sides of confirming the
// slot: while a table's batch is staged but not committed (the table is paused), the slot's
// confirmed_flush_lsn never passes it, however much WAL other databases write; and a quiet
// pipeline confirms the WAL others write, so it does not make the server retain it.
func TestSlotHoldsUncommittedAndQuietPipelineReleasesWAL(t *testing.T) {
	defer parallel(t)()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 1000))
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	slot := p.cfg.Source.Slot

	other := testenv.NewDatabase(t)
	otherWrites := func(ctx context.Context) {
		t.Helper()
		if err := execSQL(ctx, other,
			`CREATE TABLE IF NOT EXISTS noise (id serial PRIMARY KEY, pad text)`,
			`INSERT INTO noise (pad) SELECT repeat('x', 200) FROM generate_series(1, 50000)`); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()

	// A quiet pipeline: other databases write, and the slot follows.
	otherWrites(ctx)
	_, after := slotState(ctx, t, p.dsn, slot)
	err := localrun.WaitFor(ctx, "the quiet slot to confirm the WAL other databases wrote", 2*time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			confirmed, current := slotState(ctx, t, p.dsn, slot)
			return confirmed >= after, "retained " + humanBytes(current-confirmed), nil
		})
	if err != nil {
		t.Fatal(err)
	}

	// An uncommitted batch holds the slot.
	p.sluice("pause", "--table", "public.items")
	p.waitPaused(itemsTable)
	p.exec(itemsSeed(2001, 2100))
	_, held := slotState(ctx, t, p.dsn, slot) // past the insert's commit record
	var confirmed uint64
	if !holdWatching(t, 20*time.Second, 2*time.Second, "the slot must not confirm the paused table's uncommitted batch while other databases write",
		func() bool {
			otherWrites(ctx)
			confirmed, _ = slotState(ctx, t, p.dsn, slot)
			return confirmed < held
		}) {
		t.Fatalf("confirmed_flush_lsn %X passed the uncommitted batch of the paused table (its commit ends before %X)", confirmed, held)
	}
	p.sluice("resume", "--table", "public.items")
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
	err = localrun.WaitFor(ctx, "the slot to move past the committed batch", 2*time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			confirmed, current := slotState(ctx, t, p.dsn, slot)
			return confirmed >= held, "retained " + humanBytes(current-confirmed), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatUint(n>>20, 10) + " MiB"
	case n >= 1<<10:
		return strconv.FormatUint(n>>10, 10) + " KiB"
	}
	return strconv.FormatUint(n, 10) + " B"
}
