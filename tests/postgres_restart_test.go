package tests

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/devstack"
)

// TestPostgresRestartMidStream restarts the source server while the pipeline streams, on every
// sink: a private PostgreSQL (its own devstack directory, never the shared server) is written to
// until it shuts down (fast shutdown, as a restart by an operator or a failover drill does),
// stays down a few seconds and comes back on the same address with the same data. The reader
// reconnects and resumes from the slot; every change made before the shutdown and after the
// restart reaches the sink, key by key.
func TestPostgresRestartMidStream(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			ctx := context.Background()
			stack, pg := privateService(t, devstack.ServicePostgres)
			if err := execSQL(ctx, pg.URL, "CREATE DATABASE restart_src"); err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(pg.URL)
			if err != nil {
				t.Fatal(err)
			}
			u.Path = "/restart_src"
			s := sk.open(t, pipelineOptions{DSN: u.String(), SetupSQL: []string{itemsDDL, itemsSeed(1, 2000)}})
			s.know([2]int{1, 2000})
			s.p.worker("worker")
			s.p.sluice("start")
			s.p.waitStream(itemsTable)

			// Write until the server goes away: the last transactions are in the WAL but likely
			// not yet read (or not committed to the sink) when it stops. A transaction whose
			// COMMIT errors may or may not have committed; the comparison is with what the
			// source holds afterwards.
			w := startRounds(s.p.dsn, 100000)
			w.waitMore(t, 10, "writes in flight when the server goes away")
			reading, err := s.p.readerAttempt(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stack.Halt(ctx, devstack.ServicePostgres); err != nil {
				t.Fatal(err)
			}
			written, rounds := w.stop()
			s.know(written)
			t.Logf("%d write rounds before the shutdown", rounds)
			s.p.waitReaderRetried(reading, "the source is down")
			restarted, err := stack.Ensure(ctx, devstack.ServicePostgres)
			if err != nil {
				t.Fatalf("restarting the private postgres: %v", err)
			}
			if restarted.Addr != pg.Addr {
				t.Fatalf("postgres came back on %s, not %s: the pipeline's DSN no longer reaches it", restarted.Addr, pg.Addr)
			}
			s.know(liveItemKeys...)
			s.p.exec(liveItemChanges...)
			back := time.Now()
			s.waitEqual()
			t.Logf("equal %s after the restart", time.Since(back).Round(time.Second))
		})
	}
}
