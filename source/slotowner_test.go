package source

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/failure"
)

func TestParseSlotRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, comment string
		want          slotRecord
	}{
		{"none", "a comment of the operator's", slotRecord{}},
		{"before pipelines were named", "sluice: replication slot s_1 created at 0/16B3748; do not edit", slotRecord{Found: true, Slot: "s_1", LSN: 0x16B3748}},
		{"unknown point", slotRecordText("shop", "s", 0), slotRecord{Found: true, Slot: "s", Pipeline: "shop"}},
		{"named", slotRecordText("shop", "s", 0x16B3748), slotRecord{Found: true, Slot: "s", LSN: 0x16B3748, Pipeline: "shop"}},
		{"quoted name", slotRecordText(`a "b" \c`, "s", 1), slotRecord{Found: true, Slot: "s", LSN: 1, Pipeline: `a "b" \c`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseSlotRecord(tc.comment)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parseSlotRecord(%q) = %+v, %v; want %+v", tc.comment, got, err, tc.want)
			}
		})
	}
}

// TestSetupRefusesAnotherPipelinesSlot: a pipeline naming the slot of another pipeline (another
// publication, or the same publication recorded for another pipeline) is refused at setup and
// by the preflight, naming the owner, its publication and the fix, also after the owner's slot
// was dropped; a slot of another plugin is refused too. The owner itself sets up as before.
func TestSetupRefusesAnotherPipelinesSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t, "CREATE TABLE a (id int PRIMARY KEY)", "CREATE TABLE b (id int PRIMARY KEY)")
	owner := db.config(t, "a")
	owner.Pipeline = "shop"
	setup(t, owner)

	other := db.config(t, "b")
	other.Pipeline = "billing"
	other.Slot = owner.Slot
	samePub := other
	samePub.Publication = owner.Publication
	refused := func(t *testing.T, cfg Config) {
		t.Helper()
		_, err := Setup(ctx, cfg, slog.New(slog.DiscardHandler))
		pf, ok := errors.AsType[*PreflightError](err)
		if !ok || !failure.Is(err) {
			t.Fatalf("setup of a pipeline naming another pipeline's slot: %v, want a permanent preflight error", err)
		}
		for _, want := range []string{"replication slot " + owner.Slot, `belongs to pipeline "shop"`, "publication " + owner.Publication,
			"choose another source.slot", `pipeline "billing"`} {
			if !strings.Contains(pf.Error(), want) {
				t.Errorf("the refusal does not say %q:\n%v", want, pf)
			}
		}
		if strings.Contains(pf.Error(), "pg_drop_replication_slot") {
			t.Errorf("the refusal advises dropping the other pipeline's slot:\n%v", pf)
		}
	}
	t.Run("another publication", func(t *testing.T) { refused(t, other) })
	t.Run("same publication", func(t *testing.T) { refused(t, samePub) })
	setup(t, owner) // the owner is not refused
	db.dropSlot(t, owner.Slot)
	t.Run("owner's slot dropped", func(t *testing.T) { refused(t, other) })

	plugin := db.config(t, "b")
	db.exec(t, "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", plugin.Slot)
	t.Cleanup(func() { db.dropSlot(t, plugin.Slot) })
	_, err := Setup(ctx, plugin, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), `uses output plugin "test_decoding"`) {
		t.Fatalf("setup on a test_decoding slot: %v, want a refusal", err)
	}
}

// memLog is a ConfirmLog in memory.
type memLog struct {
	mu       sync.Mutex
	furthest uint64
	ok       bool
	writes   int
	fail     error
}

func (m *memLog) Furthest(context.Context) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.furthest, m.ok, nil
}

func (m *memLog) Record(_ context.Context, lsn uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.furthest, m.ok = lsn, true
	m.writes++
	return nil
}

func (m *memLog) get() (uint64, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.furthest, m.writes
}

// TestRecreatedSlotIsLost: the reader records the furthest position it confirms before it sends
// it; a slot dropped and created again by hand under the same name (or advanced by hand) is
// past that record, and the next run fails with a permanent SlotLost naming both positions.
func TestRecreatedSlotIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t, "CREATE TABLE r (id int PRIMARY KEY)")
	cfg := db.config(t, "r")
	info := setup(t, cfg)
	log := &memLog{}
	_, stop := runStream(t, cfg, StreamOptions{Schemas: info.Schemas, Safe: nothingHeld, Confirms: log},
		func(context.Context, Event) error { return nil })
	db.exec(t, "INSERT INTO r SELECT generate_series(1, 100)")
	end := db.walLSN(t)
	for deadline := time.Now().Add(30 * time.Second); db.slotConfirmed(t, cfg.Slot) < end; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the slot was not confirmed to %s within 30 s", formatLSN(end))
		}
	}
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	recorded, writes := log.get()
	if confirmed := db.slotConfirmed(t, cfg.Slot); recorded < confirmed {
		t.Fatalf("the log holds %s, behind the slot's confirmed %s: a confirmation went out before its record", formatLSN(recorded), formatLSN(confirmed))
	}
	t.Logf("%d records in the run", writes)

	// The same slot again: accepted.
	_, stop = runStream(t, cfg, StreamOptions{Schemas: info.Schemas, Safe: nothingHeld, Confirms: log},
		func(context.Context, Event) error { return nil })
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("a run on the pipeline's own slot: %v", err)
	}

	// Dropped and created again by hand, after more writes: refused.
	db.dropSlot(t, cfg.Slot)
	db.exec(t, "INSERT INTO r SELECT generate_series(101, 200)")
	db.exec(t, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", cfg.Slot)
	recorded, _ = log.get()
	r, err := NewStream(cfg, StreamOptions{Schemas: info.Schemas, Safe: nothingHeld, Confirms: log})
	if err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second) // a reader that does not refuse streams on
	defer lcancel()
	err = r.Run(lctx, func(context.Context, Event) error { return nil })
	lost, ok := errors.AsType[*SlotLostError](err)
	if !ok || !failure.Is(err) {
		t.Fatalf("streaming a slot created again by hand: %v, want a permanent SlotLost", err)
	}
	for _, want := range []string{"created again", formatLSN(recorded), formatLSN(db.slotConfirmed(t, cfg.Slot)), "sluice resync"} {
		if !strings.Contains(lost.Error(), want) {
			t.Errorf("the SlotLost does not say %q: %v", want, lost)
		}
	}
	// A pipeline without a record (set up before the log was kept) is not checked.
	r, _ = NewStream(cfg, StreamOptions{Schemas: info.Schemas, Safe: nothingHeld, Confirms: &memLog{}})
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := r.Run(rctx, func(context.Context, Event) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a run with no record: %v, want it to stream until cancelled", err)
	}
}

// TestRecordConfirm: a confirmation beyond the record is written first (recording everything
// received), at most once per confirmRecordEvery; one that cannot be recorded yet, or whose
// write fails, is lowered to the record, never below what was confirmed.
func TestRecordConfirm(t *testing.T) {
	t.Parallel()
	log := &memLog{}
	r := &Stream{opts: StreamOptions{Confirms: log}, log: slog.New(slog.DiscardHandler), recorded: 100}
	r.confirmed.Store(100)
	if got := r.recordConfirm(context.Background(), 300, 200, false); got != 200 {
		t.Fatalf("first confirmation: %d, want 200", got)
	}
	if lsn, writes := log.get(); lsn != 300 || writes != 1 {
		t.Fatalf("record %d after %d writes, want 300 after 1", lsn, writes)
	}
	r.confirmed.Store(200)
	if got := r.recordConfirm(context.Background(), 350, 300, false); got != 300 {
		t.Fatalf("within the record: %d, want 300 without a write", got)
	}
	if got := r.recordConfirm(context.Background(), 500, 400, false); got != 300 {
		t.Fatalf("beyond the record within confirmRecordEvery: %d, want 300 (the record)", got)
	}
	if got := r.recordConfirm(context.Background(), 500, 400, true); got != 400 {
		t.Fatalf("the last update: %d, want 400 (recorded at once)", got)
	}
	log.fail = errors.New("store down")
	r.recordedAt = time.Time{}
	if got := r.recordConfirm(context.Background(), 900, 800, false); got != 500 {
		t.Fatalf("a failed write: %d, want 500 (the last record)", got)
	}
	if _, writes := log.get(); writes != 2 {
		t.Fatalf("%d writes, want 2", writes)
	}
}
