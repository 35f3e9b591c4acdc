package bench

import (
	"fmt"
	"io"
	"time"
)

// Goals of issue 9, which the report checks its figures against.
const (
	GoalBackfillRatio = 0.6
	GoalStreamRatio   = 0.9
	GoalLatencyP99    = 2 * time.Second
	GoalLatencyRate   = 5000
	GoalPeakRSS       = 512 << 20
)

// Check is one goal applied to one figure.
type Check struct {
	Goal, Figure string
	Met          bool
}

// Checks applies the goals to the report's Sluice figures; icebergFlush is the configured
// flush interval (batch.max_wait) that the Iceberg latency goal adds to 2 s.
func (r Report) Checks(icebergFlush time.Duration) []Check {
	var out []Check
	for _, res := range r.Results {
		switch res.Kind {
		case KindBackfill:
			if res.Sink == "iceberg" || res.Sink == "clickhouse" {
				x := r.Ratio(res)
				out = append(out, Check{Goal: fmt.Sprintf("backfill into %s >= %.1fx limit 1", res.Sink, GoalBackfillRatio),
					Figure: fmt.Sprintf("%.2fx", x), Met: x >= GoalBackfillRatio})
			}
		case KindStreamBulk, KindStreamSmall:
			x := r.Ratio(res)
			fig := fmt.Sprintf("%.2fx", x)
			if net := r.NetRatio(res); net > 0 {
				fig += fmt.Sprintf(" (%.2fx without the %s restart)", net, res.Overhead.Round(time.Millisecond))
			}
			out = append(out, Check{Goal: fmt.Sprintf("%s >= %.1fx limit 2", res.Name, GoalStreamRatio),
				Figure: fig, Met: x >= GoalStreamRatio})
		case KindLatency:
			l := res.Latency
			limit := GoalLatencyP99
			if res.Sink == "iceberg" {
				limit += icebergFlush
			}
			fig := fmt.Sprintf("p99 %s at %.0f rows/s (%d of %d rows seen)", l.P99.Round(time.Millisecond), l.Sustained(), l.Seen, l.Rows)
			met := l.Seen == l.Rows && l.P99 <= limit && l.Sustained() >= 0.95*GoalLatencyRate
			if l.Sustained() < 0.95*GoalLatencyRate {
				fig += fmt.Sprintf("; the goal's rate %d rows/s was not reached, so unproven", GoalLatencyRate)
			}
			out = append(out, Check{Goal: fmt.Sprintf("%s p99 <= %s at %d rows/s", res.Sink, limit, GoalLatencyRate), Figure: fig, Met: met})
		}
		if res.PeakRSS > 0 && (res.Kind == KindBackfill || res.Kind == KindStreamBulk || res.Kind == KindMemoryBackfill || res.Kind == KindMemoryTx) {
			out = append(out, Check{Goal: fmt.Sprintf("worker RSS during %s <= 512 MiB", res.Name),
				Figure: fmt.Sprintf("%d MiB", res.PeakRSS>>20), Met: res.PeakRSS <= GoalPeakRSS})
		}
	}
	return out
}

// WriteChecks prints the checks as a Markdown table.
func WriteChecks(w io.Writer, checks []Check) {
	fmt.Fprintln(w, "| goal | figure | met |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, c := range checks {
		met := "yes"
		if !c.Met {
			met = "**no**"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", c.Goal, c.Figure, met)
	}
}
