package source

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
)

// runStream runs a Stream in the background; stop cancels it and returns Run's error.
func runStream(t *testing.T, cfg Config, opts StreamOptions, h Handler) (r *Stream, stop func() error) {
	t.Helper()
	if opts.StatusInterval == 0 {
		opts.StatusInterval = 50 * time.Millisecond
	}
	opts.ProgressInterval = 50 * time.Millisecond
	waitSlotFree(t, cfg)
	r, err := NewStream(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx, h) }()
	return r, func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("reader did not stop within 30 s of cancellation")
			return nil
		}
	}
}

// TestConfirmedNeverPassesSafe holds the first change as uncommitted while more transactions
// flow, and checks that the slot's confirmed_flush_lsn stops at that change's commit LSN, that
// a restarted reader delivers it again, and that once nothing is held a quiet pipeline confirms
// up to the server's WAL end.
func TestConfirmedNeverPassesSafe(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "CREATE TABLE c (id int PRIMARY KEY, v int)")
	cfg := db.config(t, "c")
	info := setup(t, cfg)
	db.exec(t, "INSERT INTO c VALUES (1, 0)")

	box := &safeBox{}
	var held atomic.Uint64
	r, stop := runStream(t, cfg, StreamOptions{Schemas: info.Schemas, Safe: box.get}, func(_ context.Context, ev Event) error {
		if c, ok := ev.(*ChangeEvent); ok && held.Load() == 0 {
			box.set(c.Change.Pos, true) // held before the handler returns
			held.Store(c.Change.Pos.LSN)
		}
		return nil
	})
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		db.exec(t, "UPDATE c SET v = v + 1")
		if h := held.Load(); h != 0 {
			if got := db.slotConfirmed(t, cfg.Slot); got > h {
				t.Fatalf("slot confirmed %s, past the held change's commit %s", formatLSN(got), formatLSN(h))
			}
			if got := r.Confirmed(); got > h {
				t.Fatalf("reader sent %s, past the held change's commit %s", formatLSN(got), formatLSN(h))
			}
		}
	}
	h := held.Load()
	if h == 0 {
		t.Fatal("no change arrived")
	}
	waitFor(t, "the slot to confirm the held position", func() bool { return db.slotConfirmed(t, cfg.Slot) == h })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopping the reader: %v", err)
	}
	if got := db.slotConfirmed(t, cfg.Slot); got != h {
		t.Fatalf("after a clean stop the slot confirmed %s, want the held %s", formatLSN(got), formatLSN(h))
	}

	// A new reader starts from the slot: the held transaction comes again (at least once).
	var first atomic.Uint64
	box.set(batch.Position{}, false)
	_, stop = runStream(t, cfg, StreamOptions{Schemas: info.Schemas, Safe: func() (batch.Position, bool) {
		if f := first.Load(); f == 0 {
			return batch.Position{LSN: h}, true // still held until the first change is seen
		}
		return box.get()
	}}, func(_ context.Context, ev Event) error {
		if c, ok := ev.(*ChangeEvent); ok && first.Load() == 0 {
			first.Store(c.Change.Pos.LSN)
		}
		return nil
	})
	waitFor(t, "the first change after restart", func() bool { return first.Load() != 0 })
	if got := first.Load(); got != h {
		t.Fatalf("after restart the first change commits at %s, want the held %s again", formatLSN(got), formatLSN(h))
	}
	// Nothing held and no more writes: keepalives carry the slot up to the WAL end.
	target := db.walLSN(t)
	waitFor(t, "a quiet pipeline to confirm up to the WAL end", func() bool { return db.slotConfirmed(t, cfg.Slot) >= target })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopping the reader: %v", err)
	}
}

// TestBusyHandlerKeepsConnection blocks the handler for several times the walsender's timeout
// (set to 1 s for this connection) while messages wait: the receiving goroutine must keep
// sending status updates, or the server drops the connection and later writes never arrive.
func TestBusyHandlerKeepsConnection(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "CREATE TABLE a (id int PRIMARY KEY)")
	cfg := db.config(t, "a")
	info := setup(t, cfg)
	sep := "?"
	if strings.Contains(cfg.DSN, "?") {
		sep = "&"
	}
	cfg.DSN += sep + "options=-c%20wal_sender_timeout%3D1000"
	db.exec(t, "INSERT INTO a SELECT generate_series(1, 2000)")
	var n atomic.Int64
	_, stop := runStream(t, cfg, StreamOptions{Schemas: info.Schemas, Safe: nothingHeld, ReadAhead: 1, StatusInterval: 200 * time.Millisecond},
		func(_ context.Context, ev Event) error {
			if _, ok := ev.(*ChangeEvent); ok {
				if n.Add(1) == 1 {
					time.Sleep(4 * time.Second)
				}
			}
			return nil
		})
	waitFor(t, "the first 2000 rows", func() bool { return n.Load() == 2000 })
	db.exec(t, "INSERT INTO a VALUES (2001)")
	waitFor(t, "a row written after the busy handler (is the connection still alive?)", func() bool { return n.Load() == 2001 })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopping the reader: %v", err)
	}
}
