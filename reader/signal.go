package reader

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicecdc/sluice/staging"
)

// MaxSignalRefs is the most staged batches one signal to a table carries: about 600 bytes of
// JSON each, 64 keep a signal's payload near 40 KB, well inside the workflows' payload budget
// (workflows.MaxPayloadBytes; its budget test checks the two together).
const MaxSignalRefs = 64

// signalEvery is the shortest time between two signals to one table. A table whose batches
// are staged more often (a backlog read after a restart, a bulk update, a paused table's
// stream) gets its refs coalesced into one signal at this rate, each signal costing its
// workflow a few history events and a workflow task whatever the refs it carries; a table
// staging a batch at most this often gets each one signalled at once, adding no latency.
const signalEvery = 250 * time.Millisecond

// signalAtEnd bounds the signalling of the last staged batches at a run's clean end.
const signalAtEnd = 10 * time.Second

// queueSignal adds a staged batch to its table's next signal and sends that signal now when the
// table's last one is signalEvery old or the signal is full; otherwise tick sends it when due.
// Signals keep each table's batches in the order they were staged, and a failed signal fails the
// run, so a table is never signalled a batch while an earlier one of its stays unsignalled in the
// same run (the next run reads the unsignalled ones again: they hold the slot).
func (r *run) queueSignal(ctx context.Context, t *table, ref staging.BatchRef) error {
	t.unsignalled = append(t.unsignalled, ref)
	if len(t.unsignalled) >= MaxSignalRefs || r.now().Sub(t.signalled) >= signalEvery {
		return r.signal(ctx, t)
	}
	return nil
}

// signalDue sends every table's signal that is signalEvery old.
func (r *run) signalDue(ctx context.Context, now time.Time) error {
	for _, t := range r.tables {
		if len(t.unsignalled) > 0 && now.Sub(t.signalled) >= signalEvery {
			if err := r.signal(ctx, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// signalAll sends every table's pending signal.
func (r *run) signalAll(ctx context.Context) error {
	for _, t := range r.tables {
		if err := r.signal(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// signal sends the table's pending refs in one signal (none pending: nothing).
func (r *run) signal(ctx context.Context, t *table) error {
	if len(t.unsignalled) == 0 {
		return nil
	}
	refs := t.unsignalled
	if err := r.deps.Tables.SignalBatches(ctx, t.schema, refs); err != nil {
		return fmt.Errorf("signalling table %s of %s: %w", t.schema.Table, staging.DescribeRefs(refs), err)
	}
	r.result.Signals++
	t.unsignalled = nil // the signal's slice may still be referenced by the sender
	t.signalled = r.now()
	return nil
}
