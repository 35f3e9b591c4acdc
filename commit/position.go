package commit

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/staging"
)

// StoredPosition reads the position the table's target holds. A position of another source
// than t.Source (when set) is a SourceMismatch failure, one older than the slot (t.SlotSince) a
// PositionGap.
func StoredPosition(ctx context.Context, sink sinks.Sink, t Table) (batch.SourcePosition, bool, error) {
	pos, ok, err := sink.Position(ctx, t.Spec)
	if err != nil {
		return pos, ok, fmt.Errorf("reading committed position of table %s: %w", t.Table(), err)
	}
	if ok && t.Source != nil && pos.Source != *t.Source {
		return pos, ok, SourceMismatch(t, fmt.Errorf("the target holds position %s, this pipeline reads source %s: %w",
			pos, *t.Source, batch.ErrDifferentSource))
	}
	return pos, ok, positionGap(t, pos, ok)
}

// Window lists the first window of t's staged batches whose hi is after after (all of them when
// has is false), in commit order, at most refs of them and, when bytes > 0, no more than bytes
// of JSON (staging.Store.ListWindow). Staged batches of another source than after are a
// SourceMismatch failure.
func Window(ctx context.Context, st *staging.Store, t Table, after batch.SourcePosition, has bool, refs, bytes int) (staging.Window, error) {
	w, err := st.ListWindow(ctx, t.Pipeline, t.Table(), after, has, refs, bytes)
	if errors.Is(err, batch.ErrDifferentSource) {
		return staging.Window{}, SourceMismatch(t, err)
	}
	return w, err
}

// covers reads the sink's committed position and how much of ref it covers (batch.Covered, the
// watermark rule). Positions of different sources are a SourceMismatch.
func covers(ctx context.Context, sink sinks.Sink, t Table, ref staging.BatchRef) (batch.Cover, error) {
	pos, ok, err := sink.Position(ctx, t.Spec)
	if err != nil {
		return batch.CoverNone, fmt.Errorf("reading committed position of table %s: %w", t.Table(), err)
	}
	cover, err := batch.Covered(pos, ok, ref.Phase, ref.Lo, ref.Hi)
	if err != nil {
		return cover, SourceMismatch(t, fmt.Errorf("batch %s: %w", ref.Range(), err))
	}
	return cover, nil
}
