package tests

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/internal/devstack"
)

// TestPostgresRestartMidStream restarts the source server while the pipeline streams: a
// private PostgreSQL (its own devstack directory, never the shared server) is written to until
// it shuts down (fast shutdown, as a restart by an operator or a failover drill does), stays down
// a few seconds and comes back on the same address with the same data. The reader reconnects
// and resumes from the slot; every change made before the shutdown and after the restart reaches
// Iceberg, key by key.
func TestPostgresRestartMidStream(t *testing.T) {
	t.Parallel()
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
	p := newIcebergPipeline(t, u.String(), []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 5000))
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)

	// Write until the server goes away: the last transactions are in the WAL but likely not yet
	// read (or not committed to the sink) when it stops. A transaction whose COMMIT errors may or
	// may not have committed; the comparison is with what the source holds afterwards.
	writing := make(chan int, 1)
	go func() {
		i := 0
		for ; i < 1000; i++ {
			if err := execSQL(ctx, p.dsn,
				itemsSeed(100000+i*20, 100000+i*20+19),
				fmt.Sprintf(`UPDATE public.items SET qty = coalesce(qty, 0) + 1 WHERE id %% 25 = %d`, i%25),
				fmt.Sprintf(`DELETE FROM public.items WHERE id BETWEEN %d AND %d`, 1000+i*5, 1000+i*5+1)); err != nil {
				break
			}
		}
		writing <- i
	}()
	time.Sleep(2 * time.Second)
	if err := stack.Halt(ctx, devstack.ServicePostgres); err != nil {
		t.Fatal(err)
	}
	n := <-writing
	t.Logf("%d write rounds before the shutdown", n)
	time.Sleep(3 * time.Second)
	restarted, err := stack.Ensure(ctx, devstack.ServicePostgres)
	if err != nil {
		t.Fatalf("restarting the private postgres: %v", err)
	}
	if restarted.Addr != pg.Addr {
		t.Fatalf("postgres came back on %s, not %s: the pipeline's DSN no longer reaches it", restarted.Addr, pg.Addr)
	}
	p.exec(liveItemChanges...)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
}
