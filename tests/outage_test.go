package tests

import (
	"context"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/devstack"
)

// TestClickHouseOutageMidStream takes a private ClickHouse away while the source keeps writing:
// the table's CommitBatch retries, visibly (pending activity attempts and last failure, as the
// Web UI shows them), the server stays away until the table's workflow retries the failed step
// itself (the attempts of one execution spent: status last_error), and once the server is back
// the table catches up with nothing lost. TestCouchbaseOutageMidStream and TestIcebergStorageOutageMidStream
// (outage_sinks_test.go) are the same fault on the other sinks.
func TestClickHouseOutageMidStream(t *testing.T) {
	defer parallel(t)()
	ctx := context.Background()
	stack, ch := privateService(t, devstack.ServiceClickHouse)
	s := itemsTarget(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 5000)}}, clickhouseDestinationAt(t, ch.Addr))
	s.p.worker("worker")
	s.p.sluice("start")
	s.p.waitStream(itemsTable)

	w := startRounds(s.p.dsn, 100000)
	w.waitMore(t, 10, "writes in flight when ClickHouse goes away")
	if err := stack.Halt(ctx, devstack.ServiceClickHouse); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	t.Logf("while down: %s", waitCommitRetried(t, s.p, "ClickHouse is down"))
	t.Logf("then: %s", s.p.waitTableRetrying(itemsTable, "ClickHouse is down"))
	if _, err := stack.Ensure(ctx, devstack.ServiceClickHouse); err != nil {
		t.Fatalf("bringing clickhouse back: %v", err)
	}
	t.Logf("clickhouse down for %s", time.Since(down).Round(time.Second))
	w.waitMore(t, 10, "writes go on after the outage too")
	_, rounds := w.stop()
	s.p.exec(liveItemChanges...)
	back := time.Now()
	s.waitEqual()
	t.Logf("%d write rounds; equal %s after the outage", rounds, time.Since(back).Round(time.Second))
}
