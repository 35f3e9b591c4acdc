package tests

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/localrun"
)

// setSourceKey adds key: value under source: in the pipeline's config file (a test's way to name
// the slot another pipeline uses).
func (p *icebergPipeline) setSourceKey(key, value string) {
	p.t.Helper()
	data, err := os.ReadFile(p.config)
	if err != nil {
		p.t.Fatal(err)
	}
	text := strings.Replace(string(data), "source:\n", fmt.Sprintf("source:\n  %s: %s\n", key, value), 1)
	if err := os.WriteFile(p.config, []byte(text), 0o644); err != nil {
		p.t.Fatal(err)
	}
	if p.cfg, err = config.Load(p.config); err != nil {
		p.t.Fatalf("config with source.%s: %v", key, err)
	}
}

// waitReaderFailed waits until `sluice status` shows the reader failed with an error that says
// every one of wants, and returns the error.
func (p *icebergPipeline) waitReaderFailed(why string, wants ...string) string {
	p.t.Helper()
	var st statusJSON
	err := localrun.WaitFor(context.Background(), "the reader to fail: "+why, 2*time.Minute, 500*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			var ok bool
			st, ok = p.status(ctx)
			if ok || st.Reader.State != "failed" {
				return false, fmt.Sprintf("exit ok %v, %+v", ok, st), nil
			}
			for _, w := range wants {
				if !strings.Contains(st.Reader.Error, w) {
					return false, fmt.Sprintf("the error does not say %q: %s", w, st.Reader.Error), nil
				}
			}
			return true, "", nil
		})
	if err != nil {
		p.t.Fatal(err)
	}
	return st.Reader.Error
}

// TestRecreatedSlot drops the pipeline's slot and creates it again by hand under the same name
// while the worker is down, with rows changed in between: the new slot has the same name, the
// publication's record still says the old creation point, and nothing in Postgres tells them
// apart; but its confirmed position is past the furthest one Sluice ever confirmed (recorded in
// the staging store), so the reader fails with SlotLost, not retried, naming the slot, both
// positions and the remedy, instead of streaming on and skipping the rows changed in between.
// The remedy (teardown, start, resync) brings the sink back to the source.
func TestRecreatedSlot(t *testing.T) {
	defer parallel(t)()
	ctx := context.Background()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 100))
	w := p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	p.exec(`UPDATE public.items SET qty = qty + 1 WHERE id <= 50`)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
	slot := p.cfg.Source.Slot
	// The last confirmation (and its record) is at most a status interval behind.
	var end string
	if err := p.queryRow(ctx, `SELECT pg_current_wal_lsn()::text`, &end); err != nil {
		t.Fatal(err)
	}
	err := localrun.WaitFor(ctx, "the slot to be confirmed to "+end, time.Minute, 200*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			var done bool
			err := p.queryRow(ctx, fmt.Sprintf(`SELECT confirmed_flush_lsn >= '%s' FROM pg_replication_slots WHERE slot_name = '%s'`, end, slot), &done)
			return done, "", err
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	p.dropSlot(ctx, slot)
	p.exec(`UPDATE public.items SET qty = qty + 1000 WHERE id BETWEEN 60 AND 70`) // never in any slot
	p.exec(fmt.Sprintf(`SELECT pg_create_logical_replication_slot('%s', 'pgoutput')`, slot))
	p.exec(`UPDATE public.items SET qty = qty + 1 WHERE id = 1`)
	p.worker("worker2")

	msg := p.waitReaderFailed("the slot was created again", "SlotLost", slot, "created again", "the furthest position Sluice ever confirmed", "sluice teardown")
	t.Logf("reader: %s", msg)

	p.sluice("teardown", "--yes")
	p.sluice("start")
	if appErr := p.waitTableFailed(itemsTable); appErr.Type() != "PositionGap" {
		t.Fatalf("after teardown and start the table failed with %s, want PositionGap: %v", appErr.Type(), appErr)
	}
	p.sluice("resync", "--table", "public.items")
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
}

// TestSlotOfAnotherPipeline: a second pipeline on the same database that names the first one's
// slot (with its own publication) is refused at setup, naming the first pipeline, its
// publication and the fix, and the first pipeline goes on streaming; one in another database of
// the same server is refused too, naming the slot's database.
func TestSlotOfAnotherPipeline(t *testing.T) {
	defer parallel(t)()
	a := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 100))
	a.worker("worker")
	a.sluice("start")
	a.waitStream(itemsTable)
	slot := a.cfg.Source.Slot

	b := newIcebergPipeline(t, a.dsn, []string{"public.others:raw.others"}, `CREATE TABLE public.others (id int PRIMARY KEY, v text)`)
	b.setSourceKey("slot", slot)
	if out, err := b.sluiceFails("check"); err == nil || !strings.Contains(out, `belongs to pipeline "`+a.name+`"`) {
		t.Errorf("sluice check of the second pipeline does not refuse the slot (exit %v):\n%s", err, out)
	}
	b.worker("worker")
	b.sluice("start")
	msg := b.waitReaderFailed("the slot is another pipeline's", "replication slot "+slot, `belongs to pipeline "`+a.name+`"`,
		"publication "+a.cfg.Source.Publication, "choose another source.slot")
	t.Logf("second pipeline: %s", msg)

	c := newIcebergPipeline(t, "", []string{"public.others:raw.others"}, `CREATE TABLE public.others (id int PRIMARY KEY, v text)`)
	c.setSourceKey("slot", slot)
	c.worker("worker")
	c.sluice("start")
	msg = c.waitReaderFailed("the slot is another database's", "replication slot "+slot, "belongs to database", "choose another source.slot")
	t.Logf("pipeline in another database: %s", msg)

	a.exec(`UPDATE public.items SET qty = qty + 1 WHERE id <= 30`, itemsSeed(101, 120))
	a.waitEqual("public.items", "raw.items", "id", itemColumns)
}

// pgCtlStop runs `pg_ctl stop -m fast` on a private server (as the postgres user when this
// process is root, as the server runs) and returns how long it took.
func pgCtlStop(t *testing.T, pg devstack.Info, timeout time.Duration) time.Duration {
	t.Helper()
	args := []string{filepath.Join(pg.Extra["bin"], "pg_ctl"), "stop", "-D", pg.Extra["data"], "-m", "fast", "-w", "-t", fmt.Sprint(int(timeout.Seconds()))}
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	began := time.Now()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	took := time.Since(began)
	if err != nil {
		t.Fatalf("pg_ctl stop -m fast: %v after %s\n%s", err, took.Round(time.Millisecond), out)
	}
	return took
}

// TestFastShutdownWhileHolding stops the source server with `pg_ctl stop -m fast` while the
// pipeline streams and holds the slot back (a paused table's staged batch is not committed, so
// the reader may not confirm past it). Postgres' walsender ends at a shutdown only once its
// client confirmed everything it was sent, and a client that keeps answering resets
// wal_sender_timeout: before, the shutdown waited for the reader indefinitely. The reader now
// sees the shutdown (SQLSTATE 57P03 on a new connection) and closes its stream, so the stop
// returns within a few seconds; after a restart the pipeline resumes and, once the table is
// resumed, the sink equals the source key by key.
func TestFastShutdownWhileHolding(t *testing.T) {
	defer parallel(t)()
	ctx := context.Background()
	stack, pg := privateService(t, devstack.ServicePostgres)
	if err := execSQL(ctx, pg.URL, "CREATE DATABASE shutdown_src"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/shutdown_src"
	p := newIcebergPipeline(t, u.String(), []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 200))
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	var timeout string
	if err := p.queryRow(ctx, `SHOW wal_sender_timeout`, &timeout); err != nil {
		t.Fatal(err)
	}

	p.sluice("pause", "--table", "public.items")
	err = localrun.WaitFor(ctx, "the table to pause", time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, itemsTable, p.started)
			return err == nil && st.Paused, fmt.Sprintf("%+v", st), err
		})
	if err != nil {
		t.Fatal(err)
	}
	p.exec(`UPDATE public.items SET qty = qty + 7 WHERE id <= 50`)
	err = localrun.WaitFor(ctx, "the staged batch to hold the slot", time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, _ := p.status(ctx)
			for _, tb := range st.Tables {
				if tb.HoldsBytes > 0 && st.Slot != nil && st.Slot.Active {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%+v", st), nil
		})
	if err != nil {
		t.Fatal(err)
	}

	reading, err := p.readerAttempt(ctx)
	if err != nil {
		t.Fatal(err)
	}
	took := pgCtlStop(t, pg, 45*time.Second)
	t.Logf("pg_ctl stop -m fast took %s (wal_sender_timeout %s)", took.Round(time.Millisecond), timeout)
	if took > 10*time.Second {
		t.Fatalf("pg_ctl stop -m fast took %s with the pipeline holding its slot, want under 10 s", took.Round(time.Millisecond))
	}
	p.waitReaderRetried(reading, "the source is down") // the reader retries as a source outage
	restarted, err := stack.Ensure(ctx, devstack.ServicePostgres)
	if err != nil {
		t.Fatalf("restarting the private postgres: %v", err)
	}
	if restarted.Addr != pg.Addr {
		t.Fatalf("postgres came back on %s, not %s", restarted.Addr, pg.Addr)
	}
	p.exec(`UPDATE public.items SET qty = qty + 1 WHERE id > 150`, itemsSeed(201, 230))
	p.sluice("resume", "--table", "public.items")
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
}

// Retained WAL bounds of TestIdleTablesHoldNoWAL once the writes elsewhere stop (see
// docs/operations.md, "Idle tables hold no WAL"): the slot's confirmed_flush_lsn follows the
// server's WAL end through keepalives (one status update, 5 s, behind at most), and its
// restart_lsn follows the running-transactions record Postgres logs every 15 s while WAL is
// written and at every checkpoint; once idle, both end within a few records of the WAL end.
const (
	// One WAL segment: the server recycles WAL by whole segments, so a slot that retains less
	// keeps nothing on disk (measured idle: a few records; under a loaded machine the last
	// running-transactions record can come late, leaving 1-2 MB for a while).
	idleRetainedBound  = 16 << 20 // pg_current_wal_lsn - restart_lsn
	idleConfirmedBound = 64 << 10 // pg_current_wal_lsn - confirmed_flush_lsn
	idleSettleWithin   = 2 * time.Minute
	// idleTrailShare bounds what the slot retains during the writes, as a share of the WAL written
	// elsewhere: it trails by the seconds between running-transactions records (15 s) and status
	// updates (5 s), about 40% of a 70 s run at worst here; a slot held by the idle table would
	// retain all of it.
	idleTrailShare = 0.6
)

// slotLag returns the server's WAL end and how far the slot's restart_lsn and
// confirmed_flush_lsn are behind it, in bytes.
func slotLag(ctx context.Context, dsn, slot string) (current string, retained, unconfirmed int64, err error) {
	err = queryRowDSN(ctx, dsn, fmt.Sprintf(`SELECT pg_current_wal_lsn()::text,
		pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = '%s'`, slot), &current, &retained, &unconfirmed)
	return
}

// TestIdleTablesHoldNoWAL: while the pipeline's table is idle and other tables write about 1 GB
// of WAL, in the same database and in another database of the same server, the slot keeps
// advancing: during the writes it trails by seconds of WAL, never by what was written, and once
// they stop the WAL it retains and the WAL it has not confirmed are under the bounds above
// within idleSettleWithin.
func TestIdleTablesHoldNoWAL(t *testing.T) {
	defer parallel(t)()
	ctx := context.Background()
	_, pg := privateService(t, devstack.ServicePostgres)
	if err := execSQL(ctx, pg.URL, "CREATE DATABASE idle_src", "CREATE DATABASE idle_noise"); err != nil {
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
	const noiseDDL = `CREATE TABLE noise (id int PRIMARY KEY, pad text)`
	const noiseSeed = `INSERT INTO noise SELECT g, repeat(md5(g::text), 30) FROM generate_series(1, 50000) g`
	p := newIcebergPipeline(t, dbURL("idle_src"), []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 100), noiseDDL, noiseSeed)
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	slot := p.cfg.Source.Slot
	noise := []string{dbURL("idle_src"), dbURL("idle_noise")}
	if err := execSQL(ctx, noise[1], noiseDDL, noiseSeed); err != nil {
		t.Fatal(err)
	}

	var startLSN string
	if err := queryRowDSN(ctx, pg.URL, `SELECT pg_current_wal_lsn()::text`, &startLSN); err != nil {
		t.Fatal(err)
	}
	const target = 1 << 30
	var (
		written, maxRetained, maxUnconfirmed int64
		round                                int
		began                                = time.Now()
	)
	for written < target {
		round++
		// Each round rewrites every row of one database's noise table (about 60 MB of WAL).
		if err := execSQL(ctx, noise[round%2], fmt.Sprintf(`UPDATE noise SET pad = repeat(md5((id + %d)::text), 30)`, round)); err != nil {
			t.Fatal(err)
		}
		if err := queryRowDSN(ctx, pg.URL, fmt.Sprintf(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '%s')::bigint`, startLSN), &written); err != nil {
			t.Fatal(err)
		}
		_, retained, unconfirmed, err := slotLag(ctx, pg.URL, slot)
		if err != nil {
			t.Fatal(err)
		}
		maxRetained, maxUnconfirmed = max(maxRetained, retained), max(maxUnconfirmed, unconfirmed)
	}
	took := time.Since(began)
	t.Logf("wrote %d MB of WAL in %d rounds in %s (%.0f MB/s); during the writes the slot retained at most %d MB and left at most %d MB unconfirmed",
		written>>20, round, took.Round(time.Second), float64(written)/float64(1<<20)/took.Seconds(), maxRetained>>20, maxUnconfirmed>>20)
	// During the writes the slot trails by what is written between two running-transactions
	// records (15 s) and a status update (5 s), never by everything written.
	// Fast writes can end within one running-transactions interval, so the bound is also a time:
	// the larger of the share and 40 s of writes. (A held slot is caught after the writes.)
	trail := max(int64(float64(written)*idleTrailShare), int64(float64(written)/took.Seconds()*40))
	if maxRetained > trail {
		t.Errorf("during the writes the slot retained up to %d MB of the %d MB written elsewhere, more than %.0f%% of it or 40 s of writes (%d MB)",
			maxRetained>>20, written>>20, idleTrailShare*100, trail>>20)
	}

	settled := time.Now()
	err := localrun.WaitFor(ctx, "the slot to catch up with the WAL written elsewhere", idleSettleWithin, 500*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			current, retained, unconfirmed, err := slotLag(ctx, pg.URL, slot)
			return retained < idleRetainedBound && unconfirmed < idleConfirmedBound,
				fmt.Sprintf("at %s the slot retains %d bytes and has %d bytes unconfirmed", current, retained, unconfirmed), err
		})
	if err != nil {
		t.Fatal(err)
	}
	_, retained, unconfirmed, _ := slotLag(ctx, pg.URL, slot)
	t.Logf("%s after the writes the slot retains %d bytes and has %d bytes unconfirmed", time.Since(settled).Round(100*time.Millisecond), retained, unconfirmed)

	// The idle table still streams.
	p.exec(`UPDATE public.items SET qty = qty + 1 WHERE id <= 10`)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
}

// queryRowDSN runs one query on dsn and scans its row into dst.
func queryRowDSN(ctx context.Context, dsn, sql string, dst ...any) error {
	return sourceDBs.QueryRow(ctx, dsn, sql, nil, dst...)
}
