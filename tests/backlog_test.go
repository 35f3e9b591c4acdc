package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/localrun"
)

// TestRestartBacklogIsCommittedOnceRead stops a pipeline, writes while it is stopped, and starts
// it again with a batch.max_wait of five minutes: the backlog's tail (fewer rows than a batch)
// reaches the sink once the reader has read it, not a flush interval later. A quiet stream
// still waits for max_wait: a row written after the catch-up is not in the sink a minute later.
// And a clean stop confirms to the slot what the tables committed, so nothing is read twice.
func TestRestartBacklogIsCommittedOnceRead(t *testing.T) {
	defer parallel(t)()
	p := newPipelineWith(t, pipelineOptions{Tables: []string{"public.items:raw.items"},
		SetupSQL: []string{itemsDDL, itemsSeed(1, 200)}})
	w := p.worker("worker-1")
	p.sluice("start")
	p.waitStream(itemsTable)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
	p.exec(`UPDATE public.items SET qty = 0 WHERE id = 1`)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)

	p.sluice("stop")
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	// The clean stop confirmed the committed update to the slot: nothing is left to read again.
	var pending int
	slot := "sluice_" + p.name
	// The worker has exited, but Postgres ends its walsender a moment later: peeking at a slot
	// still active fails (SQLSTATE 55006).
	if err := localrun.WaitFor(t.Context(), "the slot's walsender to end", time.Minute, 50*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			var active bool
			err := p.queryRow(ctx, fmt.Sprintf("SELECT active FROM pg_replication_slots WHERE slot_name = '%s'", slot), &active)
			return !active, "active", err
		}); err != nil {
		t.Fatal(err)
	}
	if err := p.queryRow(t.Context(), fmt.Sprintf(`SELECT count(*) FROM pg_logical_slot_peek_binary_changes('%s', NULL, NULL,
		'proto_version', '1', 'publication_names', '%s')`, slot, slot), &pending); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Errorf("after a clean stop the slot still holds %d messages of committed transactions: the last status update did not confirm them", pending)
	}

	// The rest runs with a flush interval of five minutes.
	cfg, err := os.ReadFile(p.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.config, bytes.Replace(cfg, []byte("max_wait: 500ms"), []byte("max_wait: 5m"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	p.exec(`UPDATE public.items SET qty = qty + 1 WHERE id <= 50`, `DELETE FROM public.items WHERE id > 190`, itemsSeed(301, 320))
	p.started = time.Now().Add(-time.Second)
	p.worker("worker-2")
	p.sluice("start")
	start := time.Now()
	// Well under max_wait (5m), with room for a loaded machine.
	p.waitEqualWithin(90*time.Second, "public.items", "id", itemColumns, icebergColumnsReader(p, "raw.items", itemColumns))
	t.Logf("backlog committed %s after sluice start", time.Since(start).Round(time.Millisecond))

	// After the catch-up, max_wait shapes batches again: a new row waits for it.
	p.exec(itemsSeed(401, 401))
	holdFor(t, time.Minute, "row 401 must not be committed within a minute of its insert, under batch.max_wait 5m")
	got, err := icebergColumnsReader(p, "raw.items", itemColumns)(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Rows["401"]; ok {
		t.Fatalf("row 401 was committed within a minute of its insert, under batch.max_wait 5m: the reader flushed a quiet stream early")
	}
}
