package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/sluicecdc/sluice/internal/devstack"
	"github.com/sluicecdc/sluice/internal/localrun"
	"github.com/sluicecdc/sluice/internal/testenv"
	"github.com/sluicecdc/sluice/workflows"
)

// TestClickHouseOutageMidStream takes a private ClickHouse away for 30 seconds while the source
// keeps writing: the table's CommitBatch retries, visibly (pending activity attempts and last
// failure, as the Web UI shows them), and once the server is back the table catches up with
// nothing lost.
func TestClickHouseOutageMidStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack, ch := privateService(t, devstack.ServiceClickHouse)
	db := testenv.RandomName("sluice_outage_")
	p := newPipeline(t, "", fmt.Sprintf("  type: clickhouse\n  clickhouse:\n    addr: %s\n    database: %s", ch.Addr, db),
		[]string{"public.items:items"}, itemsDDL, itemsSeed(1, 5000))
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)

	if err := stack.Halt(ctx, devstack.ServiceClickHouse); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	for i := 0; i < 10; i++ {
		p.exec(itemsSeed(10000+i*100, 10000+i*100+99), fmt.Sprintf("DELETE FROM public.items WHERE id BETWEEN %d AND %d", 100+i*10, 100+i*10+4))
		time.Sleep(time.Second)
	}
	id := workflows.TableWorkflowID(p.name, itemsTable)
	err := localrun.WaitFor(ctx, "CommitBatch to show retries while ClickHouse is down", time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			desc, err := p.temporal.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				return false, "", err
			}
			for _, a := range desc.GetPendingActivities() {
				if a.GetActivityType().GetName() == "CommitBatch" && a.GetAttempt() > 1 && a.GetLastFailure() != nil {
					t.Logf("CommitBatch attempt %d, last failure: %s", a.GetAttempt(), a.GetLastFailure().GetMessage())
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d pending activities", len(desc.GetPendingActivities())), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(down.Add(30 * time.Second)))
	if _, err := stack.Ensure(ctx, devstack.ServiceClickHouse); err != nil {
		t.Fatalf("bringing clickhouse back: %v", err)
	}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{ch.Addr}, Protocol: clickhouse.Native, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p.waitEqualTo("public.items", "id", e2eColumns, func(ctx context.Context) (localrun.Table, error) {
		return readClickHouse(ctx, conn, db+".items")
	})
}
