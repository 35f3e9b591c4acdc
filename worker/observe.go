package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/control"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/metrics"
	"github.com/sluicecdc/sluice/source"
)

// observeEvery is how often the worker reads the slot's state and the pipeline's failed tables
// for the metrics.
const observeEvery = 15 * time.Second

// observe records, every observeEvery until ctx ends, what no activity sees: the replication
// slot's state on the source (pg_replication_slots, over a connection of conns) and the tables
// that failed (from Temporal's visibility). A failed read is logged once per kind of failure and retried at the next tick.
func observe(ctx context.Context, cfg *config.Config, conns *source.Pool, tables control.Tables, m *metrics.Metrics, log *slog.Logger) {
	var lastSlotErr, lastFailedErr string
	once := func() {
		rctx, cancel := context.WithTimeout(ctx, observeEvery)
		defer cancel()
		if st, err := source.ReadSlotState(rctx, conns, cfg.Source.DSN, cfg.Source.Slot); err != nil {
			if err.Error() != lastSlotErr && ctx.Err() == nil {
				log.Warn("reading the replication slot's state for the metrics", logkey.Slot, cfg.Source.Slot, logkey.Error, err)
			}
			lastSlotErr = err.Error()
		} else {
			lastSlotErr = ""
			m.SlotObserved(cfg.Pipeline, st)
		}
		if failed, err := tables.FailedTables(rctx, cfg.Pipeline); err != nil {
			if err.Error() != lastFailedErr && ctx.Err() == nil {
				log.Warn("listing failed tables for the metrics (are the Sluice search attributes registered? see `sluice check`)", logkey.Error, err)
			}
			lastFailedErr = err.Error()
		} else {
			lastFailedErr = ""
			m.FailedTables(cfg.Pipeline, failed)
		}
	}
	every(ctx, observeEvery, once)
}

// every calls f at once and then every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	f()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
