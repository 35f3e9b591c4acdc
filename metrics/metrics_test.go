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
	var nilM *Metrics
	nilM.Commit("p", "public.a", 1, nil, 0, 1) // a nil *Metrics records nothing, without panicking
}
