package bench

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// The goals of issue 21 (performance, third pass): the one place for their numbers.
const (
	// GoalBackfillRatio is the backfill of --rows rows over COPY binary (limit 1).
	GoalBackfillRatio = 0.8
	// GoalMemoryBackfillRatio is the memory case's backfill (--memory-rows rows) over the same
	// COPY rate.
	GoalMemoryBackfillRatio = 0.8
	// GoalStreamBulkRatio and GoalStreamSmallRatio are the stream workloads over pg_recvlogical
	// (limit 2) consuming the same WAL.
	GoalStreamBulkRatio  = 1.0
	GoalStreamSmallRatio = 1.0
	// GoalLatencyRate is the insert rate (rows/s) at which the p99 latency is judged.
	GoalLatencyRate = 5000
	// GoalLatencyMargin is what the p99 latency may add to batch.max_wait.
	GoalLatencyMargin = 250 * time.Millisecond
	// GoalPeakRSS is the worker's peak RSS, worst case over every phase of a sink.
	GoalPeakRSS = 400 << 20
)

// Goal identifiers, stable across runs: they name the hand-written causes of a miss.
const (
	GoalBackfill       = "backfill"
	GoalMemoryBackfill = "memory-backfill"
	GoalStreamBulk     = "stream-bulk"
	GoalStreamSmall    = "stream-small"
	GoalLatency        = "latency"
	GoalRSS            = "peak-rss"
)

// GoalSinks are the sinks issue 21 sets goals for; other sinks (Couchbase) are measured without.
func GoalSinks() []string { return []string{"iceberg", "clickhouse"} }

// HasGoals tells whether sink has goals.
func HasGoals(sink string) bool { return slices.Contains(GoalSinks(), sink) }

// Check is one goal applied to one sink's figure.
type Check struct {
	Sink string
	// Goal is the goal's identifier (GoalBackfill, ...); Text states it.
	Goal, Text string
	// Figure is what was measured, as the report prints it ("not measured: ..." when nothing was).
	Figure   string
	Met      bool
	Measured bool
	// Result is the measurement the figure comes from (nil when not measured): its profiles
	// explain a miss.
	Result *Result
	// Memory tells that the goal is about memory: a miss shows the heap profile, not the CPU one.
	Memory bool
}

// Key names the check across runs, "<sink>/<goal>".
func (c Check) Key() string { return c.Sink + "/" + c.Goal }

// Checks applies issue 21's goals to every sink of the run that has goals (r.Sinks), in the
// order of GoalSinks, listing each goal met or not; maxWait is batch.max_wait of the run's
// pipelines, which the latency goal adds GoalLatencyMargin to.
func (r *Report) Checks(maxWait time.Duration) []Check {
	var out []Check
	for _, sink := range GoalSinks() {
		if !slices.Contains(r.Sinks, sink) {
			continue
		}
		out = append(out,
			r.ratioCheck(sink, GoalBackfill, KindBackfill, GoalBackfillRatio,
				fmt.Sprintf("backfill of %d rows >= %.1fx COPY binary", r.Rows, GoalBackfillRatio)),
			r.ratioCheck(sink, GoalMemoryBackfill, KindMemoryBackfill, GoalMemoryBackfillRatio,
				fmt.Sprintf("backfill of %d rows (memory case) >= %.1fx the same COPY rate", r.MemoryRows, GoalMemoryBackfillRatio)),
			r.ratioCheck(sink, GoalStreamBulk, KindStreamBulk, GoalStreamBulkRatio,
				fmt.Sprintf("stream, one %d-row UPDATE >= %.1fx pg_recvlogical", r.Bulk, GoalStreamBulkRatio)),
			r.ratioCheck(sink, GoalStreamSmall, KindStreamSmall, GoalStreamSmallRatio,
				fmt.Sprintf("stream, %d single-row transactions >= %.1fx pg_recvlogical", r.SmallTx, GoalStreamSmallRatio)),
			r.latencyCheck(sink, maxWait),
			r.rssCheck(sink))
	}
	return out
}

// find returns the sink's result of kind, nil when there is none.
func (r *Report) find(sink, kind string) *Result {
	for i := range r.Results {
		if r.Results[i].Sink == sink && r.Results[i].Kind == kind {
			return &r.Results[i]
		}
	}
	return nil
}

func notMeasured(c Check) Check {
	c.Figure = "not measured in this run"
	return c
}

// ratioCheck compares the throughput of the sink's result of kind with its limit's.
func (r *Report) ratioCheck(sink, goal, kind string, want float64, text string) Check {
	c := Check{Sink: sink, Goal: goal, Text: text}
	res := r.find(sink, kind)
	if res == nil {
		return notMeasured(c)
	}
	x := r.Ratio(*res)
	if x <= 0 {
		c.Figure = fmt.Sprintf("%.0f rows/s; its limit (%q) was not measured", res.RowsPerSec(), res.Limit)
		c.Result = res
		return c
	}
	c.Measured, c.Result, c.Met = true, res, x >= want
	c.Figure = fmt.Sprintf("%.2fx (%.0f rows/s)", x, res.RowsPerSec())
	if net := r.NetRatio(*res); net > 0 {
		c.Figure += fmt.Sprintf("; %.2fx without the %s restart", net, res.Overhead.Round(time.Millisecond))
	}
	return c
}

// latencyCheck: every row seen, at the goal's rate (within 5%), p99 within maxWait + the margin.
func (r *Report) latencyCheck(sink string, maxWait time.Duration) Check {
	limit := maxWait + GoalLatencyMargin
	c := Check{Sink: sink, Goal: GoalLatency, Text: fmt.Sprintf("p99 latency at %d rows/s <= batch.max_wait + %s = %s",
		GoalLatencyRate, GoalLatencyMargin, limit)}
	res := r.find(sink, KindLatency)
	if res == nil || res.Latency == nil {
		return notMeasured(c)
	}
	l := res.Latency
	c.Measured, c.Result = true, res
	c.Figure = fmt.Sprintf("p99 %s at %.0f rows/s (%d of %d rows seen)", l.P99.Round(time.Millisecond), l.Sustained(), l.Seen, l.Rows)
	rateOK := l.Sustained() >= 0.95*GoalLatencyRate
	if !rateOK {
		c.Figure += fmt.Sprintf("; the goal's rate %d rows/s was not reached, so unproven", GoalLatencyRate)
	}
	c.Met = l.Rows > 0 && l.Seen == l.Rows && l.P99 <= limit && rateOK
	return c
}

// rssCheck takes the worst peak RSS over every phase of the sink that read it, but the --scaling
// series: it runs the backfill at parallelisms other than the run's, and reports its RSS itself.
func (r *Report) rssCheck(sink string) Check {
	c := Check{Sink: sink, Goal: GoalRSS, Text: fmt.Sprintf("worker peak RSS, worst phase <= %d MiB", GoalPeakRSS>>20), Memory: true}
	var worst *Result
	phases := 0
	for i := range r.Results {
		res := &r.Results[i]
		if res.Sink != sink || res.PeakRSS <= 0 || res.Kind == KindScaling {
			continue
		}
		phases++
		if worst == nil || res.PeakRSS > worst.PeakRSS {
			worst = res
		}
	}
	if worst == nil {
		return notMeasured(c)
	}
	c.Measured, c.Result, c.Met = true, worst, worst.PeakRSS <= GoalPeakRSS
	c.Figure = fmt.Sprintf("%d MiB in %q (worst of %d phases)", worst.PeakRSS>>20, worst.Name, phases)
	return c
}

// WriteChecks prints the checks as a Markdown table: every goal of every sink, met or not.
func WriteChecks(w io.Writer, checks []Check) {
	fmt.Fprintln(w, "| sink | goal | figure | met |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, c := range checks {
		met := "yes"
		switch {
		case !c.Measured:
			met = "**no** (not measured)"
		case !c.Met:
			met = "**no**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", c.Sink, cell(c.Text), cell(c.Figure), met)
	}
}

// Misses are the checks that were not met.
func Misses(checks []Check) []Check {
	var out []Check
	for _, c := range checks {
		if !c.Met {
			out = append(out, c)
		}
	}
	return out
}
