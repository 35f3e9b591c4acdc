package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/localrun"
)

// statusJSON is the part of `sluice status --output json` the tests read.
type statusJSON struct {
	Reader struct {
		State string `json:"state"`
		Error string `json:"error"`
	} `json:"reader"`
	Slot *struct {
		Exists        bool   `json:"exists"`
		Active        bool   `json:"active"`
		WALStatus     string `json:"wal_status"`
		RetainedBytes int64  `json:"retained_bytes"`
	} `json:"slot"`
	Tables []struct {
		Table      string `json:"table"`
		Error      string `json:"error"`
		HoldsBytes int64  `json:"holds_wal_bytes"`
	} `json:"tables"`
	Problems []string `json:"problems"`
}

// status runs `sluice status --output json` and returns the report and whether it exited 0.
func (p *icebergPipeline) status(ctx context.Context) (statusJSON, bool) {
	p.t.Helper()
	out, err := localrun.Sluice(ctx, bins.Starter, p.env, "status", "--output", "json", "--config", p.config)
	var st statusJSON
	js := out
	if i := strings.LastIndex(out, "\n}"); i >= 0 {
		js = out[:i+2] // stderr's "sluice: ..." line follows the JSON on a failure
	}
	if jerr := json.Unmarshal([]byte(js), &st); jerr != nil && ctx.Err() == nil {
		p.t.Fatalf("sluice status --output json: %v (exit: %v)\n%s", jerr, err, out)
	}
	return st, err == nil
}

// sluiceFails runs the starter CLI and returns its output and error, for commands that may exit
// non-zero.
func (p *icebergPipeline) sluiceFails(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return localrun.Sluice(ctx, bins.Starter, p.env, append(args, "--config", p.config)...)
}

// dropSlot terminates the walsender that streams from slot (the reader) and drops the slot, as
// an operator would, again until the drop wins the race with the reader's reconnection.
func (p *icebergPipeline) dropSlot(ctx context.Context, slot string) {
	p.t.Helper()
	err := localrun.WaitFor(ctx, "slot "+slot+" to be dropped", time.Minute, 100*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			conn, err := pgx.Connect(ctx, p.dsn)
			if err != nil {
				return false, "", err
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot); err != nil {
				return false, "", err
			}
			_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55006" { // in use: the walsender is still exiting
				return false, pgErr.Message, nil
			}
			return err == nil, "", err
		})
	if err != nil {
		p.t.Fatal(err)
	}
}

// TestDroppedSlot drops the pipeline's slot while it streams and changes rows: the reader fails
// with SlotLost, not retried, and `sluice status` shows it on the reader and every table and
// exits non-zero (before, it showed the table streaming with no error while nothing arrived). A
// new `sluice start` does not recreate the slot behind the tables' backs (SlotLost again);
// `sluice teardown --yes` leaves no slot and no publication; after a new start the slot is new,
// and the table, whose position is older, stops with PositionGap rather than skipping the rows
// changed while no slot existed; `sluice resync` brings the sink back to the source.
func TestDroppedSlot(t *testing.T) {
	defer parallel(t)()
	ctx := context.Background()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 100))
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	slot := p.cfg.Source.Slot

	// Healthy: the reader runs, the slot is active, exit 0.
	err := localrun.WaitFor(ctx, "status to show the reader running on an active slot", time.Minute, 500*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, ok := p.status(ctx)
			return ok && st.Reader.State == "running" && st.Slot != nil && st.Slot.Active && st.Slot.WALStatus != "",
				fmt.Sprintf("exit ok %v, %+v", ok, st), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	text := p.sluice("status")
	t.Logf("sluice status (healthy):\n%s", text)
	for _, want := range []string{"reader: running", "slot:   " + slot + " active", "wal_status", "retained WAL", "safe_wal_size"} {
		if !strings.Contains(text, want) {
			t.Errorf("status does not show %q:\n%s", want, text)
		}
	}

	p.dropSlot(ctx, slot)
	p.exec(`UPDATE public.items SET qty = qty + 1 WHERE id <= 10`)

	var st statusJSON
	err = localrun.WaitFor(ctx, "status to show the lost slot and exit non-zero", time.Minute, 500*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			var ok bool
			st, ok = p.status(ctx)
			return !ok && st.Reader.State == "failed", fmt.Sprintf("exit ok %v, %+v", ok, st), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if st.Slot == nil || st.Slot.Exists {
		t.Errorf("status shows the slot as %+v, want it missing", st.Slot)
	}
	if !strings.Contains(st.Reader.Error, slot) {
		t.Errorf("the reader's error does not name slot %s: %s", slot, st.Reader.Error)
	}
	for _, tb := range st.Tables {
		if !strings.Contains(tb.Error, slot) {
			t.Errorf("table %s does not show the reader's failure: %q", tb.Table, tb.Error)
		}
	}
	out, err := p.sluiceFails("status")
	t.Logf("sluice status (slot dropped):\n%s", out)
	if err == nil {
		t.Fatalf("sluice status exited 0 with the slot dropped:\n%s", out)
	}
	for _, want := range []string{"reader: failed", slot + " does not exist", "problem: the reader failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}

	if !strings.Contains(st.Reader.Error, "SlotLost") || !strings.Contains(st.Reader.Error, "was dropped") || !strings.Contains(st.Reader.Error, "sluice teardown") {
		t.Errorf("the reader's error is not a SlotLost naming what happened and the remedy: %s", st.Reader.Error)
	}

	// Starting again does not recreate the slot: the tables would skip the rows changed meanwhile.
	p.sluice("start")
	err = localrun.WaitFor(ctx, "the new run's setup to fail with SlotLost", time.Minute, 500*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			var ok bool
			st, ok = p.status(ctx)
			return !ok && st.Reader.State == "failed" && strings.Contains(st.Reader.Error, "SlotLost") && strings.Contains(st.Reader.Error, "setting up"),
				fmt.Sprintf("%+v", st), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if st.Slot == nil || st.Slot.Exists {
		t.Fatalf("a new start recreated slot %s: %+v", slot, st.Slot)
	}

	// Teardown: no slot, no publication; it says what stays.
	if out, err := p.sluiceFails("teardown"); err == nil {
		t.Fatalf("teardown without --yes went ahead:\n%s", out)
	}
	out = p.sluice("teardown", "--yes")
	t.Logf("sluice teardown:\n%s", out)
	for _, want := range []string{"dropped publication", "kept:", "raw.items"} {
		if !strings.Contains(out, want) {
			t.Errorf("teardown does not say %q:\n%s", want, out)
		}
	}
	var slots, pubs int
	if err := p.queryRow(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'),
		(SELECT count(*) FROM pg_publication WHERE pubname = '%s')`, slot, p.cfg.Source.Publication), &slots, &pubs); err != nil {
		t.Fatal(err)
	}
	if slots != 0 || pubs != 0 {
		t.Fatalf("after teardown: %d slots named %s, %d publications named %s", slots, slot, pubs, p.cfg.Source.Publication)
	}

	// A new slot under the same name: the table's position predates it.
	p.sluice("start")
	appErr := p.waitTableFailed(itemsTable)
	if appErr.Type() != "PositionGap" {
		t.Fatalf("the table failed with %s, want PositionGap: %v", appErr.Type(), appErr)
	}
	for _, want := range []string{"public.items", slot, "sluice resync", "--table public.items"} {
		if !strings.Contains(appErr.Error(), want) {
			t.Errorf("the PositionGap error does not name %q: %v", want, appErr)
		}
	}
	if _, ok := p.status(ctx); ok {
		t.Error("sluice status exited 0 with the table stopped by PositionGap")
	}

	// The remedy: resync; the rows updated while no slot existed arrive.
	p.sluice("resync", "--table", "public.items")
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
}

// TestInvalidatedSlot runs a pipeline on a Postgres of its own with max_slot_wal_keep_size 1MB
// and a paused table, so that heavy writes elsewhere make the server invalidate the slot: the
// reader fails with SlotLost (invalidated), not retried, `sluice status` shows it within seconds
// and exits non-zero; `sluice check` reports the retained WAL and the limit; the remedy
// (teardown, start, resync) brings the table back to sink = source.
func TestInvalidatedSlot(t *testing.T) {
	defer parallel(t)()
	ctx := context.Background()
	_, pg := privateService(t, devstack.ServicePostgres)
	if err := execSQL(ctx, pg.URL, "CREATE DATABASE invalid_src", "CREATE DATABASE invalid_noise",
		"ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'", "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	dbURL := func(name string) string {
		u, err := url.Parse(pg.URL)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + name
		return u.String()
	}
	p := newIcebergPipeline(t, dbURL("invalid_src"), []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 100))
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	slot := p.cfg.Source.Slot

	check := p.sluice("check")
	t.Logf("sluice check:\n%s", check)
	for _, want := range []string{"slot " + slot + " retains", "max_slot_wal_keep_size is 1MB"} {
		if !strings.Contains(check, want) {
			t.Errorf("sluice check does not say %q:\n%s", want, check)
		}
	}

	// A paused table with a staged batch holds the slot while another database writes.
	p.sluice("pause", "--table", "public.items")
	err := localrun.WaitFor(ctx, "the table to pause", time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, itemsTable, p.started)
			return err == nil && st.Paused, fmt.Sprintf("%+v", st), err
		})
	if err != nil {
		t.Fatal(err)
	}
	p.exec(`UPDATE public.items SET qty = qty + 100 WHERE id <= 20`)
	noise := dbURL("invalid_noise")
	if err := execSQL(ctx, noise, `CREATE TABLE noise (id serial PRIMARY KEY, pad text)`); err != nil {
		t.Fatal(err)
	}
	err = localrun.WaitFor(ctx, "the server to invalidate the slot", 2*time.Minute, 200*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			if err := execSQL(ctx, noise, `INSERT INTO noise (pad) SELECT repeat('x', 500) FROM generate_series(1, 20000)`,
				`SELECT pg_switch_wal()`, `CHECKPOINT`); err != nil {
				return false, "", err
			}
			var status string
			err := p.queryRow(ctx, fmt.Sprintf(`SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = '%s'`, slot), &status)
			return status == "lost", "wal_status " + status, err
		})
	if err != nil {
		t.Fatal(err)
	}
	lostAt := time.Now()

	var st statusJSON
	err = localrun.WaitFor(ctx, "status to show the invalidated slot and exit non-zero", time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			var ok bool
			st, ok = p.status(ctx)
			return !ok && st.Reader.State == "failed", fmt.Sprintf("exit ok %v, %+v", ok, st), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status showed the invalidation %s after it", time.Since(lostAt).Round(time.Millisecond))
	if !strings.Contains(st.Reader.Error, "SlotLost") || !strings.Contains(st.Reader.Error, "invalidated") || !strings.Contains(st.Reader.Error, slot) {
		t.Errorf("the reader's error is not a SlotLost naming the slot and the invalidation: %s", st.Reader.Error)
	}
	if st.Slot == nil || st.Slot.WALStatus != "lost" {
		t.Errorf("status shows the slot as %+v, want wal_status lost", st.Slot)
	}
	for _, tb := range st.Tables {
		if !strings.Contains(tb.Error, "SlotLost") {
			t.Errorf("table %s does not show the SlotLost: %q", tb.Table, tb.Error)
		}
	}

	// The remedy.
	p.sluice("teardown", "--yes")
	p.sluice("start")
	if appErr := p.waitTableFailed(itemsTable); appErr.Type() != "PositionGap" {
		t.Fatalf("the table failed with %s, want PositionGap: %v", appErr.Type(), appErr)
	}
	p.sluice("resync", "--table", "public.items")
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
}
