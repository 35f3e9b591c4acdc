package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
)

func TestCheckSlotLost(t *testing.T) {
	t.Parallel()
	rec := slotRecord{Found: true, Slot: "s", LSN: 0x16B3748}
	for _, tc := range []struct {
		name string
		slot slot
		rec  slotRecord
		want string // "" for no error
	}{
		{"new pipeline", slot{}, slotRecord{}, ""},
		{"healthy", slot{Exists: true, WALStatus: WALReserved}, rec, ""},
		{"unreserved is not lost yet", slot{Exists: true, WALStatus: WALUnreserved}, rec, ""},
		{"invalidated", slot{Exists: true, WALStatus: WALLost}, rec, "was invalidated (wal_status lost)"},
		{"invalidated without record", slot{Exists: true, WALStatus: WALLost}, slotRecord{}, "was invalidated"},
		{"dropped", slot{}, rec, "was dropped (the publication records its creation at 0/16B3748"},
		{"record of another slot", slot{}, slotRecord{Found: true, Slot: "other"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkSlotLost(tc.slot, tc.rec, "s")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want none", err)
				}
				return
			}
			lost, ok := errors.AsType[*SlotLostError](err)
			if !ok || !failure.Is(err) {
				t.Fatalf("got %v, want a permanent SlotLostError", err)
			}
			for _, want := range []string{"replication slot s", tc.want, "sluice teardown", "sluice resync"} {
				if !strings.Contains(lost.Error(), want) {
					t.Errorf("error %q does not say %q", lost.Error(), want)
				}
			}
		})
	}
}

// TestSetupRecordsSlotAndRefusesToRecreateIt: Setup records the slot's creation point on the
// publication and returns it on every later setup; a pipeline whose slot was dropped gets
// SlotLost from Setup and from the stream, never a new slot; after Teardown a new slot starts
// later. A slot set up before records were kept is adopted with an unknown creation point.
func TestSetupRecordsSlotAndRefusesToRecreateIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t, "CREATE TABLE a (id int PRIMARY KEY)")
	cfg := db.config(t, "a")
	first := setup(t, cfg)
	if !first.SlotCreated || first.SlotSince == 0 || first.SlotSince > first.ConfirmedLSN {
		t.Fatalf("first setup: SlotSince %X, confirmed %X", first.SlotSince, first.ConfirmedLSN)
	}
	if again := setup(t, cfg); again.SlotCreated || again.SlotSince != first.SlotSince {
		t.Fatalf("second setup: SlotSince %X, want %X", again.SlotSince, first.SlotSince)
	}
	if got, err := TableSince(ctx, cfg.DSN, cfg.Publication, cfg.Slot, cfg.Tables[0].Table); err != nil || got != first.SlotSince {
		t.Fatalf("TableSince = %X, %v; want %X", got, err, first.SlotSince)
	}

	db.dropSlot(t, cfg.Slot)
	_, err := Setup(ctx, cfg, slog.New(slog.DiscardHandler))
	if lost, ok := errors.AsType[*SlotLostError](err); !ok || !strings.Contains(lost.What, "was dropped") {
		t.Fatalf("setup after the drop: %v, want SlotLost (dropped)", err)
	}
	if s, _ := readSlot(ctx, db.conn, cfg.Slot); s.Exists {
		t.Fatal("setup recreated the dropped slot")
	}
	r, err := NewStream(cfg, StreamOptions{Safe: nothingHeld})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(ctx, func(context.Context, Event) error { return nil })
	if _, ok := errors.AsType[*SlotLostError](err); !ok || !failure.Is(err) {
		t.Fatalf("streaming a dropped slot: %v, want a permanent SlotLost", err)
	}

	if err := Teardown(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	next := setup(t, cfg)
	if !next.SlotCreated || next.SlotSince <= first.SlotSince {
		t.Fatalf("setup after teardown: created %v, SlotSince %X, want a new slot after %X", next.SlotCreated, next.SlotSince, first.SlotSince)
	}

	// A pipeline set up before records were kept: the slot is adopted, its start unknown, and
	// a later drop is still recognized.
	db.exec(t, "COMMENT ON PUBLICATION "+quoteIdent(cfg.Publication)+" IS NULL")
	if adopted := setup(t, cfg); adopted.SlotCreated || adopted.SlotSince != 0 {
		t.Fatalf("adopting setup: created %v, SlotSince %X, want 0", adopted.SlotCreated, adopted.SlotSince)
	}
	db.dropSlot(t, cfg.Slot)
	if _, err := Setup(ctx, cfg, slog.New(slog.DiscardHandler)); !errors.As(err, new(*SlotLostError)) {
		t.Fatalf("setup after dropping an adopted slot: %v, want SlotLost", err)
	}
}

// TestTableJoiningLaterIsRecorded: a table added to a running pipeline's config joins the
// publication with a record of where it joined, kept through later records of the slot, so a
// table added back after `sluice remove` cannot resume from its old position (it would skip the
// changes made while it was not published); the tables of the publication's creation keep the
// slot's creation point.
func TestTableJoiningLaterIsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t, "CREATE TABLE a (id int PRIMARY KEY)", "CREATE TABLE b (id int PRIMARY KEY)")
	cfg := db.config(t, "a")
	first := setup(t, cfg)
	if len(first.Joined) != 0 {
		t.Fatalf("a new pipeline's tables joined later: %v", first.Joined)
	}
	db.exec(t, "INSERT INTO a VALUES (1)") // WAL moves: b joins after the slot's creation point
	cfg.Tables = append(cfg.Tables, db.config(t, "b").Tables...)
	second := setup(t, cfg)
	a, b := cfg.Tables[0].Table, cfg.Tables[1].Table
	joined, ok := second.Joined[b.String()]
	if !ok || joined <= first.SlotSince || second.TableSince(b) != joined || second.TableSince(a) != first.SlotSince {
		t.Fatalf("after adding b: joined %v, slot since %X; TableSince(a) %X, TableSince(b) %X", second.Joined, first.SlotSince, second.TableSince(a), second.TableSince(b))
	}
	if second.SlotSince != first.SlotSince {
		t.Fatalf("adding a table changed the slot's record: since %X, want %X", second.SlotSince, first.SlotSince)
	}
	for _, tc := range []struct {
		table batch.TableName
		want  uint64
	}{{a, first.SlotSince}, {b, joined}} {
		if got, err := TableSince(ctx, cfg.DSN, cfg.Publication, cfg.Slot, tc.table); err != nil || got != tc.want {
			t.Errorf("TableSince(%s) = %X, %v; want %X", tc.table, got, err, tc.want)
		}
	}
	// Rewriting the slot's record (as a setup that names the pipeline does) keeps the joined line.
	conn := db.conn
	if err := writeSlotRecord(ctx, conn, "other", cfg.Publication, cfg.Slot, first.SlotSince); err != nil {
		t.Fatal(err)
	}
	if rec, err := readSlotRecord(ctx, conn, cfg.Publication); err != nil || rec.Joined[b.String()] != joined || rec.LSN != first.SlotSince {
		t.Fatalf("record after a rewrite: %+v, %v; want b joined at %X", rec, err, joined)
	}
	// Dropped from the publication (sluice remove) and added back: it joins again, later.
	db.exec(t, fmt.Sprintf("ALTER PUBLICATION %s DROP TABLE b", cfg.Publication))
	db.exec(t, "INSERT INTO a VALUES (2)")
	if again := setup(t, cfg); again.Joined[b.String()] <= joined {
		t.Fatalf("b added back: joined %v, want later than %X", again.Joined, joined)
	}
}
