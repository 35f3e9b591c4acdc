package reader

import (
	"context"

	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// Marks keeps the furthest position the reader confirmed to the pipeline's slot (a
// *staging.Store): the stream's ConfirmLog, with which a slot created again under the same name
// is recognized (see source.ConfirmLog).
type Marks interface {
	// ReadSlotMark returns the slot's mark; ok is false when none was written.
	ReadSlotMark(ctx context.Context, pipeline, slot string) (staging.SlotMark, bool, error)
	// WriteSlotMark replaces the slot's mark durably.
	WriteSlotMark(ctx context.Context, pipeline string, m staging.SlotMark) error
}

// confirmLog is the stream's source.ConfirmLog over Marks, for the slot created at since (the
// record the pipeline's setup keeps; 0: unknown).
type confirmLog struct {
	marks    Marks
	pipeline string
	slot     string
	since    uint64
}

// Furthest returns the mark of this slot. A mark of an earlier slot of the same name (the
// pipeline was torn down and set up again, so its slot has another creation point) is none.
func (c confirmLog) Furthest(ctx context.Context) (uint64, bool, error) {
	m, ok, err := c.marks.ReadSlotMark(ctx, c.pipeline, c.slot)
	if err != nil || !ok || m.Since != c.since {
		return 0, false, err
	}
	return m.Confirmed, true, nil
}

// Record writes lsn as the slot's mark.
func (c confirmLog) Record(ctx context.Context, lsn uint64) error {
	return c.marks.WriteSlotMark(ctx, c.pipeline, staging.SlotMark{Slot: c.slot, Since: c.since, Confirmed: lsn})
}

// confirms returns the stream's ConfirmLog; nil when the run has no Marks.
func (r *run) confirms() source.ConfirmLog {
	if r.deps.Marks == nil {
		return nil
	}
	return confirmLog{marks: r.deps.Marks, pipeline: r.cfg.Pipeline, slot: r.cfg.Source.Slot, since: r.cfg.SlotSince}
}
