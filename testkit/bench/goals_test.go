package bench

import (
	"strings"
	"testing"
	"time"
)

const mib = 1 << 20

// limitRows is the throughput of every limit in these reports: 100,000 rows in 1 s.
func limits() []Result {
	return []Result{
		{Name: "copy", Rows: 100_000, Elapsed: time.Second},
		{Name: "recv bulk", Rows: 100_000, Elapsed: time.Second},
		{Name: "recv small", Rows: 100_000, Elapsed: time.Second},
	}
}

// at is a result of sink and kind whose throughput is x times the limits' (limit named lim).
func at(sink, kind, lim string, x float64, rss int64) Result {
	return Result{Name: sink + " " + kind, Sink: sink, Kind: kind, Limit: lim, Rows: int64(x * 100_000), Elapsed: time.Second, PeakRSS: rss}
}

func latency(sink string, p99 time.Duration, rows, seen int64, elapsed time.Duration) Result {
	return Result{Name: sink + " latency", Sink: sink, Kind: KindLatency, Rows: rows, Elapsed: elapsed,
		Latency: &LatencyResult{Rows: rows, Seen: seen, Elapsed: elapsed, P99: p99}}
}

// allMet is one sink's results, each just meeting its goal.
func allMet(sink string) []Result {
	return []Result{
		at(sink, KindBackfill, "copy", GoalBackfillRatio, 300*mib),
		at(sink, KindMemoryBackfill, "copy", GoalMemoryBackfillRatio, 350*mib),
		at(sink, KindStreamBulk, "recv bulk", GoalStreamBulkRatio, 390*mib),
		at(sink, KindStreamSmall, "recv small", GoalStreamSmallRatio, GoalPeakRSS),
		latency(sink, time.Second+GoalLatencyMargin, 100_000, 100_000, 20*time.Second),
	}
}

// replace returns results with the one of the same sink and kind replaced by r.
func replace(results []Result, r Result) []Result {
	out := append([]Result(nil), results...)
	for i := range out {
		if out[i].Sink == r.Sink && out[i].Kind == r.Kind {
			out[i] = r
			return out
		}
	}
	return append(out, r)
}

func without(results []Result, kind string) []Result {
	var out []Result
	for _, r := range results {
		if r.Kind != kind {
			out = append(out, r)
		}
	}
	return out
}

func TestChecks(t *testing.T) {
	t.Parallel()
	base := allMet("iceberg")
	cases := []struct {
		name    string
		results []Result
		sinks   []string
		// missed are the goals not met, "<sink>/<goal>"; unmeasured those also not measured.
		missed, unmeasured []string
	}{
		{name: "every goal met at its bound", results: base, sinks: []string{"iceberg"}},
		{name: "backfill below the ratio", results: replace(base, at("iceberg", KindBackfill, "copy", 0.79, 300*mib)),
			sinks: []string{"iceberg"}, missed: []string{"iceberg/backfill"}},
		{name: "backfill above the ratio", results: replace(base, at("iceberg", KindBackfill, "copy", 2, 300*mib)),
			sinks: []string{"iceberg"}},
		{name: "memory backfill below the ratio", results: replace(base, at("iceberg", KindMemoryBackfill, "copy", 0.5, 300*mib)),
			sinks: []string{"iceberg"}, missed: []string{"iceberg/memory-backfill"}},
		{name: "bulk stream below pg_recvlogical", results: replace(base, at("iceberg", KindStreamBulk, "recv bulk", 0.99, 300*mib)),
			sinks: []string{"iceberg"}, missed: []string{"iceberg/stream-bulk"}},
		{name: "small transactions below pg_recvlogical", results: replace(base, at("iceberg", KindStreamSmall, "recv small", 0.5, 300*mib)),
			sinks: []string{"iceberg"}, missed: []string{"iceberg/stream-small"}},
		{name: "p99 over max_wait + 250 ms", results: replace(base, latency("iceberg", time.Second+GoalLatencyMargin+time.Millisecond, 100_000, 100_000, 20*time.Second)),
			sinks: []string{"iceberg"}, missed: []string{"iceberg/latency"}},
		{name: "a row never seen", results: replace(base, latency("iceberg", time.Second, 100_000, 99_999, 20*time.Second)),
			sinks: []string{"iceberg"}, missed: []string{"iceberg/latency"}},
		{name: "the goal's rate not reached", results: replace(base, latency("iceberg", time.Second, 100_000, 100_000, 25*time.Second)),
			sinks: []string{"iceberg"}, missed: []string{"iceberg/latency"}},
		{name: "one phase over the RSS goal", results: replace(base, at("iceberg", KindMemoryTx, "", 0, GoalPeakRSS+1)),
			sinks: []string{"iceberg"}, missed: []string{"iceberg/peak-rss"}},
		{name: "the scaling series is not a phase of the RSS goal", results: replace(base, at("iceberg", KindScaling, "copy", 1, 2*GoalPeakRSS)),
			sinks: []string{"iceberg"}},
		{name: "a phase not run is listed, not met", results: without(base, KindStreamSmall),
			sinks: []string{"iceberg"}, missed: []string{"iceberg/stream-small"}, unmeasured: []string{"iceberg/stream-small"}},
		{name: "a goal sink with nothing measured lists every goal", results: base, sinks: []string{"iceberg", "clickhouse"},
			missed:     []string{"clickhouse/backfill", "clickhouse/memory-backfill", "clickhouse/stream-bulk", "clickhouse/stream-small", "clickhouse/latency", "clickhouse/peak-rss"},
			unmeasured: []string{"clickhouse/backfill", "clickhouse/memory-backfill", "clickhouse/stream-bulk", "clickhouse/stream-small", "clickhouse/latency", "clickhouse/peak-rss"}},
		{name: "couchbase has no goals", results: append(append([]Result(nil), base...), at("couchbase", KindBackfill, "copy", 0.01, 900*mib)),
			sinks: []string{"iceberg", "couchbase"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &Report{Sinks: tc.sinks, Results: append(limits(), tc.results...)}
			checks := r.Checks(time.Second)
			wantChecks := 0
			for _, s := range tc.sinks {
				if HasGoals(s) {
					wantChecks += 6
				}
			}
			if len(checks) != wantChecks {
				t.Fatalf("%d checks, want every goal of every goal sink: %d", len(checks), wantChecks)
			}
			var missed, unmeasured []string
			for _, c := range checks {
				if !c.Met {
					missed = append(missed, c.Key())
				}
				if !c.Measured {
					unmeasured = append(unmeasured, c.Key())
				}
				if c.Measured && c.Result == nil {
					t.Errorf("%s: measured without the result it comes from", c.Key())
				}
			}
			if strings.Join(missed, ",") != strings.Join(tc.missed, ",") {
				t.Errorf("missed %v, want %v", missed, tc.missed)
			}
			if strings.Join(unmeasured, ",") != strings.Join(tc.unmeasured, ",") {
				t.Errorf("not measured %v, want %v", unmeasured, tc.unmeasured)
			}
		})
	}
}

func TestRSSCheckNamesTheWorstPhase(t *testing.T) {
	t.Parallel()
	r := &Report{Sinks: []string{"clickhouse"}, Results: append(limits(),
		at("clickhouse", KindBackfill, "copy", 1, 100*mib),
		at("clickhouse", KindMemoryTx, "", 1, 500*mib),
		at("clickhouse", KindLatency, "", 1, 200*mib),
		at("iceberg", KindBackfill, "copy", 1, 900*mib))}
	c := r.rssCheck("clickhouse")
	if c.Met || c.Result == nil || c.Result.Kind != KindMemoryTx || !strings.Contains(c.Figure, "500 MiB") || !strings.Contains(c.Figure, "worst of 3 phases") {
		t.Fatalf("check %+v: want the 500 MiB memory-tx phase of clickhouse's 3, not met", c)
	}
}

func TestRatios(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		res      Result
		ratio    float64
		netRatio float64
	}{
		{name: "twice the limit", res: Result{Limit: "copy", Rows: 200_000, Elapsed: time.Second}, ratio: 2},
		{name: "half, a restart inside", res: Result{Limit: "copy", Rows: 100_000, Elapsed: 2 * time.Second, Overhead: time.Second}, ratio: 0.5, netRatio: 1},
		{name: "no such limit", res: Result{Limit: "nope", Rows: 100_000, Elapsed: time.Second}},
		{name: "no limit", res: Result{Rows: 100_000, Elapsed: time.Second}},
	}
	r := &Report{Results: limits()}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := r.Ratio(tc.res); got != tc.ratio {
				t.Errorf("Ratio = %v, want %v", got, tc.ratio)
			}
			if got := r.NetRatio(tc.res); got != tc.netRatio {
				t.Errorf("NetRatio = %v, want %v", got, tc.netRatio)
			}
		})
	}
	if got := RatioTo(Result{Rows: 3, Elapsed: time.Second}, Result{Rows: 2, Elapsed: time.Second}); got != 1.5 {
		t.Errorf("RatioTo = %v, want 1.5", got)
	}
	if got := RatioTo(Result{Rows: 3, Elapsed: time.Second}, Result{}); got != 0 {
		t.Errorf("RatioTo an empty baseline = %v, want 0", got)
	}
}
