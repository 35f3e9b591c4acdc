package tests

import (
	"context"
	"flag"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// The end-to-end tests share the machine's cores with the services and workers they start.
// Go's -parallel caps how many run at once, not what they cost, and they cost very differently:
// most spend much of their time waiting (on a worker's restart, a heartbeat timeout, a cut
// connection, a poll), while the at-scale tests keep the machine busy for minutes and size their
// waits to the share of it they get beside three others. On two cores, few tests at a time leave
// the cores idle while most of them wait, and many at a time starve an at-scale test past its
// waits (TestManyTablesOnTenReplicationSlots' backfill).
//
// So a parallel test takes lanes, as many as the run's -parallel (the Makefile's E2E_PARALLEL):
// parallel(t) takes one, parallelHeavy(t) as many as leave room for three tests beside it
// (every lane at -parallel 4 or less, when each test has one lane), and parallelBusy(t) a third
// of them, for the tests whose workload generator writes as fast as it can while a backfill
// runs: the slower their backfill, the more they write (beside the 500-table test, several
// times as much, and that test's backfill then took twice as long). All three mark the test
// parallel; the lanes are held until the test's function returns, so a test whose parallel
// subtests do the work holds none while they run (`defer parallel(t)()`).

// lanes holds the lanes of the run; TestMain sets it once the flags are parsed.
var lanes *semaphore.Weighted

// laneCount is the run's -parallel (GOMAXPROCS when unset, as go test does).
var laneCount int64

// besideHeavy is how many tests may run beside an at-scale one: as many as ran beside them when
// their waits were sized.
const besideHeavy = 3

// setLanes sizes the lanes to the run's -parallel. TestMain calls it after flag.Parse.
func setLanes() {
	laneCount = 1
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.ParseInt(f.Value.String(), 10, 64); err == nil && n > 0 {
			laneCount = n
		}
	}
	lanes = semaphore.NewWeighted(laneCount)
}

// parallel marks t parallel and holds one lane until the returned function is called.
func parallel(t *testing.T) (release func()) {
	t.Helper()
	return takeLanes(t, 1)
}

// parallelHeavy marks t parallel and holds the lanes of an at-scale test: all but besideHeavy
// of them (at least one).
func parallelHeavy(t *testing.T) (release func()) {
	t.Helper()
	return takeLanes(t, max(laneCount-besideHeavy, 1))
}

// parallelBusy marks t parallel and holds the lanes of a test that keeps the machine busy for
// as long as it runs: a third of them (at least one).
func parallelBusy(t *testing.T) (release func()) {
	t.Helper()
	return takeLanes(t, max(laneCount/3, 1))
}

func takeLanes(t *testing.T, n int64) (release func()) {
	t.Helper()
	t.Parallel()
	start := time.Now()
	if err := lanes.Acquire(context.Background(), n); err != nil {
		t.Fatalf("taking %d of the run's %d lanes: %v", n, laneCount, err)
	}
	// go test counts a parallel test's time from its resumption, the wait for its lanes
	// included: the log says how much of it was that wait.
	if waited := time.Since(start); waited >= time.Second {
		t.Logf("waited %s for %d of the run's %d lanes", waited.Round(100*time.Millisecond), n, laneCount)
	}
	return func() { lanes.Release(n) }
}
