package iceberg

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
	"github.com/sluicecdc/sluice/testkit/race"
)

// TestMaintenanceKeepsPositionAndData compacts, rewrites manifests and expires snapshots after a
// stream of upserts and deletes: the visible rows and the committed position are unchanged, and
// the delete files and most snapshots are gone.
func TestMaintenanceKeepsPositionAndData(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	want := map[int64]row{}
	var last sinks.Batch
	for i := range 12 {
		var ch []batch.Change
		for k := range 5 {
			id := int64(i*3 + k)
			ch = append(ch, orders.Insert(id, fmt.Sprint("v", i), i))
			want[id] = row{fmt.Sprint("v", i), int64(i)}
		}
		if i > 0 {
			ch = append(ch, orders.Delete(int64(i*3-3)))
			delete(want, int64(i*3-3))
		}
		last = h.apply(ch...)
	}
	dataBefore, eqBefore := h.fileCounts()
	snapsBefore := len(h.table().Metadata().Snapshots())

	res, err := h.sink.MaintainWith(t.Context(), h.spec.Target, MaintenanceOptions{RetainSnapshots: 1, MinInputFiles: 2})
	if err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	t.Logf("maintenance: %+v", res)
	dataAfter, eqAfter := h.fileCounts()
	t.Logf("data files %d -> %d, equality delete files %d -> %d, snapshots %d -> %d",
		dataBefore, dataAfter, eqBefore, eqAfter, snapsBefore, len(h.table().Metadata().Snapshots()))

	if d := sinktest.DiffRows(want, h.rows()); d != "" {
		t.Errorf("rows changed by maintenance:\n%s", d)
	}
	if p, ok := h.position(); !ok || p != last.Hi {
		t.Errorf("Position after maintenance = %v, %v; want %s", p, ok, last.Hi)
	}
	if dataAfter >= dataBefore || eqAfter != 0 {
		t.Errorf("compaction left %d data files (from %d) and %d equality delete files", dataAfter, dataBefore, eqAfter)
	}
	if res.ExpiredSnapshots == 0 {
		t.Errorf("no snapshot expired")
	}
	// The position is still read from a summary: expiry kept the snapshot that carries it.
	if positionDepth(h.table()) == 0 {
		t.Errorf("no retained snapshot carries the position; Position relies on the property alone")
	}
	// The table keeps working after maintenance, and a second run is harmless.
	b := h.apply(orders.Update(1, "after", 1))
	want[1] = row{"after", 1}
	if _, err := h.sink.MaintainWith(t.Context(), h.spec.Target, MaintenanceOptions{RetainSnapshots: 1}); err != nil {
		t.Fatalf("second Maintain: %v", err)
	}
	if d := sinktest.DiffRows(want, h.rows()); d != "" {
		t.Errorf("rows after a commit and a second maintenance:\n%s", d)
	}
	if p, _ := h.position(); p != b.Hi {
		t.Errorf("Position = %s, want %s", p, b.Hi)
	}
}

// TestPositionFallsBackToProperty: when expiry removed every snapshot with a position in its
// summary (another engine's maintenance), the table property still answers.
func TestPositionFallsBackToProperty(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	b := h.apply(orders.Insert(1, "a", 1))
	// An empty append without the position, as another writer would commit, then expire all but it.
	tx := h.table().NewTransaction()
	if err := tx.AddFiles(t.Context(), nil, nil, false); err != nil {
		t.Fatal(err)
	}
	tbl, err := tx.Commit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	tx = tbl.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithRetainLast(1), table.WithOlderThan(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := positionDepth(h.table()); d != 0 {
		t.Fatalf("a snapshot with the position survived (depth %d); the test needs none", d)
	}
	if p, ok := h.position(); !ok || p != b.Hi {
		t.Errorf("Position = %v, %v; want %s from the table property", p, ok, b.Hi)
	}
}

// TestScanAfterManySmallCommits commits 500 small batches of updates, deletes and inserts on a
// 100,000-row table, runs maintenance, and compares the time of a full scan with that of the same
// rows freshly written in one commit. The figures are printed, not asserted (machines are noisy).
// Under the race detector (make test) it commits 100 batches on 10,000 rows: the same paths and
// checks at a fifth of the commits, whose cost the detector multiplies.
func TestScanAfterManySmallCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("500 commits: skipped with -short")
	}
	t.Parallel()
	h := newHarness(t, nil)
	rows, commits := 100_000, 500
	if race.Enabled {
		rows, commits = 10_000, 100
	}
	want := map[int64]row{}
	var bulk []batch.Change
	for id := range int64(rows) {
		bulk = append(bulk, orders.Snapshot(id, "initial", int(id%1000)))
		want[id] = row{"initial", id % 1000}
	}
	if err := h.sink.Apply(t.Context(), h.batch(batch.PhaseSnapshot, bulk...)); err != nil {
		t.Fatalf("bulk snapshot: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	next := int64(rows)
	start := time.Now()
	for c := range commits {
		var ch []batch.Change
		seen := map[int64]bool{}
		for range 20 {
			id := rng.Int64N(next)
			if seen[id] {
				continue
			}
			seen[id] = true
			if rng.IntN(4) == 0 {
				ch = append(ch, orders.Delete(id))
				delete(want, id)
			} else {
				ch = append(ch, orders.Update(id, fmt.Sprint("c", c), c))
				want[id] = row{fmt.Sprint("c", c), int64(c)}
			}
		}
		ch = append(ch, orders.Insert(next, "new", c))
		want[next] = row{"new", int64(c)}
		next++
		h.apply(ch...)
	}
	t.Logf("%d commits of ~21 changes took %v (%.1f ms/commit)", commits, time.Since(start),
		float64(time.Since(start).Milliseconds())/float64(commits))

	before := timeScan(t, h, want)
	res, err := h.sink.MaintainWith(t.Context(), h.spec.Target, MaintenanceOptions{RetainSnapshots: 1})
	if err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	t.Logf("maintenance: %+v", res)
	after := timeScan(t, h, want)

	fresh := newHarness(t, nil)
	var all []batch.Change
	for id, r := range want {
		all = append(all, orders.Snapshot(id, r.Name, int(r.Qty)))
	}
	if err := fresh.sink.Apply(t.Context(), fresh.batch(batch.PhaseSnapshot, all...)); err != nil {
		t.Fatalf("fresh write: %v", err)
	}
	freshScan := timeScan(t, fresh, want)
	t.Logf("BENCHMARK full scan of %d rows: after %d commits %v, after maintenance %v, freshly written %v (ratio %.2f)",
		len(want), commits, before, after, freshScan, float64(after)/float64(freshScan))
}

// timeScan returns the best of three full scans, checking the rows each time.
func timeScan(t *testing.T, h *harness, want map[int64]row) time.Duration {
	t.Helper()
	best := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		got, err := scanRows(t.Context(), h.table())
		if err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
		if d := sinktest.DiffRows(want, got); d != "" {
			t.Fatalf("scan differs from the expected rows:\n%.2000s", d)
		}
	}
	return best
}
