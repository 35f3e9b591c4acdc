package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLabelsAndResets checks the rules an operator's queries rely on: only configured tables
// get their own series, a table that stops holding batches drops back to zero, and a failed
// table's series goes back when the table is resumed.
func TestLabelsAndResets(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg, map[string][]string{"p": {"public.a", "public.b"}})

	m.Commit("p", "public.a", 2, map[string]int64{"insert": 3, "delete": 1}, time.Second, 100)
	m.Commit("p", "public.zzz", 1, map[string]int64{"insert": 5}, time.Second, 200) // not configured
	m.Staged("p", map[string]TableHold{"public.a": {Batches: 4, Bytes: 10, LagBytes: 50, Age: time.Minute}})
	m.Staged("p", map[string]TableHold{"public.b": {Batches: 1, Bytes: 7}})
	m.FailedTables("p", map[string]int{"PoisonBatch": 1})
	m.FailedTables("p", map[string]int{})
	m.Maintained("p", "public.b", time.Second, errors.New("boom"))

	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"inserts of a", testutil.ToFloat64(m.rowsCommitted.WithLabelValues("p", "public.a", "insert")), 3},
		{"deletes of a", testutil.ToFloat64(m.rowsCommitted.WithLabelValues("p", "public.a", "delete")), 1},
		{"an unconfigured table is _other", testutil.ToFloat64(m.rowsCommitted.WithLabelValues("p", OtherTable, "insert")), 5},
		{"batches of a", testutil.ToFloat64(m.batchesCommitted.WithLabelValues("p", "public.a")), 2},
		{"a's queue drops to zero at the next listing", testutil.ToFloat64(m.stagedBatches.WithLabelValues("p", "public.a")), 0},
		{"a's lag drops to zero", testutil.ToFloat64(m.lagBytes.WithLabelValues("p", "public.a")), 0},
		{"b's queue", testutil.ToFloat64(m.stagedBatches.WithLabelValues("p", "public.b")), 1},
		{"staging bytes of the last listing", testutil.ToFloat64(m.stagedBytes.WithLabelValues("p")), 7},
		{"failed tables series gone after resume", float64(testutil.CollectAndCount(m.failedTables)), 0},
		{"maintenance errors", testutil.ToFloat64(m.maintenanceRuns.WithLabelValues("p", "public.b", "error")), 1},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	// The reader ends on this worker (it may move to another): p's backlog gauges go to zero
	// rather than staying frozen for max() across workers; q's stay.
	m.Staged("p", map[string]TableHold{"public.b": {Batches: 3, Bytes: 9, LagBytes: 40, Age: time.Minute}, "public.zzz": {Batches: 2}})
	m.Staged("q", map[string]TableHold{"public.a": {Batches: 2, Bytes: 5}})
	m.ReaderStopped("p")
	for _, tt := range []struct {
		name      string
		got, want float64
	}{
		{"b's queue after the reader stopped", testutil.ToFloat64(m.stagedBatches.WithLabelValues("p", "public.b")), 0},
		{"b's lag after the reader stopped", testutil.ToFloat64(m.lagBytes.WithLabelValues("p", "public.b")), 0},
		{"b's age after the reader stopped", testutil.ToFloat64(m.lagSeconds.WithLabelValues("p", "public.b")), 0},
		{"p's staging bytes after the reader stopped", testutil.ToFloat64(m.stagedBytes.WithLabelValues("p")), 0},
		{"q's staging bytes stay", testutil.ToFloat64(m.stagedBytes.WithLabelValues("q")), 5},
		{"queue series left: p's two tables and q's _other", float64(testutil.CollectAndCount(m.stagedBatches)), 3},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	var nilM *Metrics
	nilM.ReaderStopped("p")
	nilM.Commit("p", "public.a", 1, nil, 0, 1) // a nil *Metrics records nothing, without panicking
}
