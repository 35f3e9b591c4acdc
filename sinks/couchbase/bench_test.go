package couchbase

import (
	"fmt"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
)

// BenchmarkApply measures documents per second through Apply on gocaves: batches of 1,000 new
// keys (upserts), with the durability and concurrency of each case, in the stream phase and in
// the snapshot phase (which also writes the key index).
func BenchmarkApply(b *testing.B) {
	const rows = 1000
	cases := []struct {
		durability  string
		concurrency int
		phase       batch.Phase
	}{
		{config.DurabilityMajority, 32, batch.PhaseStream},
		{config.DurabilityMajority, 128, batch.PhaseStream},
		{config.DurabilityNone, 8, batch.PhaseStream},
		{config.DurabilityNone, 32, batch.PhaseStream},
		{config.DurabilityMajority, 32, batch.PhaseSnapshot},
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("%s/durability=%s/concurrency=%d", c.phase, c.durability, c.concurrency), func(b *testing.B) {
			h := newHarness(b, func(cfg *Config) { cfg.Durability, cfg.Concurrency = c.durability, c.concurrency })
			op := orders.Insert
			if c.phase == batch.PhaseSnapshot {
				op = orders.Snapshot
			}
			batches := make([]sinks.Batch, b.N)
			for i := range batches {
				changes := make([]batch.Change, rows)
				for j := range changes {
					id := int64(i*rows + j)
					changes[j] = op(id, "a name of some length", j)
				}
				batches[i] = h.batch(c.phase, changes...)
			}
			b.ResetTimer()
			for i := range batches {
				if err := h.sink.Apply(b.Context(), batches[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}
