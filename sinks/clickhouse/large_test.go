package clickhouse

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
)

// TestLargeBatchIsOnePart inserts a batch larger than the server's default
// max_insert_block_size (1,048,576 rows is the default; 1.2M rows here), then a smaller one on
// top of it, and checks that each became exactly one part holding every row and the marker. It
// logs the insert throughput and how long Position takes on the resulting table. (The second
// batch was as large as the first until 2026-12-05: under the race detector each 1.2M-row round
// took about 100 s of make test, and a second one proves nothing the first does not.)
func TestLargeBatchIsOnePart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("inserts 1.25 million rows")
	}
	h := newHarness(t, "")
	sizes := []int{1_200_000, 50_000}
	var total time.Duration
	next := 0 // the next key
	for round, n := range sizes {
		cs := make([]batch.Change, n)
		for i := range cs {
			cs[i] = orders.Insert(int64(next+i), "bulk", i%1000)
		}
		next += n
		b := h.batch(batch.PhaseStream, cs...)
		start := time.Now()
		if err := h.sink.Apply(t.Context(), b); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		took := time.Since(start)
		total += took
		t.Logf("round %d: Apply of %d rows took %v (%.0f rows/s)", round, n, took, float64(n)/took.Seconds())
		var (
			minBlock, maxBlock int64
			rows               uint64
		)
		q := `SELECT min_block_number, max_block_number, rows FROM system.parts
			WHERE database = ? AND table = 'orders' AND active ORDER BY max_block_number DESC LIMIT 1`
		if err := h.conn.QueryRow(t.Context(), q, h.db).Scan(&minBlock, &maxBlock, &rows); err != nil {
			t.Fatal(err)
		}
		if minBlock != maxBlock || rows != uint64(n+1) {
			t.Fatalf("round %d: newest part spans blocks %d..%d with %d rows; want one block of %d rows (batch and marker)",
				round, minBlock, maxBlock, rows, n+1)
		}
		if pos, _ := h.position(); pos != b.Hi {
			t.Fatalf("position %v, want %v", pos, b.Hi)
		}
	}
	t.Logf("insert throughput: %.0f rows/s", float64(next)/total.Seconds())

	var lat []time.Duration
	for range 15 {
		start := time.Now()
		h.position()
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	t.Logf("Position on a %d-row table: median %v, max %v", next, lat[len(lat)/2], lat[len(lat)-1])
	if got := h.count(fmt.Sprintf("SELECT count() FROM %s.orders_current", quote(h.db))); got != uint64(next) {
		t.Fatalf("view shows %d rows, want %d", got, next)
	}
}
