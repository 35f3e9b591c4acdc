package activities

import (
	"context"
	"fmt"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/commit"
	"github.com/sluicecdc/sluice/staging"
)

// WindowLimit bounds a window of staged batches returned to a workflow: at most Refs refs and,
// when Bytes > 0, no more than Bytes of JSON (at least one ref when any is staged). The
// TableWorkflow sets it from its payload budget; zero values take DefaultWindowRefs and no byte
// bound.
type WindowLimit struct {
	Refs  int `json:"refs,omitempty"`
	Bytes int `json:"bytes,omitempty"`
}

// DefaultWindowRefs is the window size of a caller that sets none (histories recorded before
// windows existed called LoadTable with a bare TableConfig).
const DefaultWindowRefs = 256

func (l WindowLimit) refs() int {
	if l.Refs <= 0 {
		return DefaultWindowRefs
	}
	return l.Refs
}

// LoadTableInput names the table to load and bounds the staged batches returned. It embeds
// TableConfig, so the JSON of a bare TableConfig (recorded histories) decodes into it.
type LoadTableInput struct {
	TableConfig
	Window WindowLimit `json:"window,omitzero"`
}

// LoadTableResult is where a table stands: the sink's committed position and the first window
// of staged batches after it, in commit order.
type LoadTableResult struct {
	Position    batch.SourcePosition `json:"position"`
	HasPosition bool                 `json:"has_position"` // false: the table needs a backfill
	Staged      []staging.BatchRef   `json:"staged"`
	// More is how many staged batches the table needs beyond Staged (0: Staged is all of them).
	More int `json:"more,omitempty"`
	// StagedHi is the highest hi of every staged batch the table needs (how far its lag reaches).
	StagedHi batch.SourcePosition `json:"staged_hi,omitzero"`
}

// LoadTable reads the table's committed position from its sink and lists the first window of
// staged batches the sink does not hold yet. A new run of a TableWorkflow (first start, resume,
// continue-as-new, restart after a lost snapshot session) starts from it. Staged batches of
// another source than the committed position are a non-retryable SourceMismatch error.
func (a *Commit) LoadTable(ctx context.Context, in LoadTableInput) (_ LoadTableResult, err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in.TableConfig); err != nil {
		return LoadTableResult{}, err
	}
	sink, err := a.Sinks.Sink(ctx, in.Sink)
	if err != nil {
		return LoadTableResult{}, fmt.Errorf("opening sink %s for table %s: %w", in.Sink.Name, in.Table(), err)
	}
	pos, ok, err := commit.StoredPosition(ctx, sink, in.TableConfig)
	if err != nil {
		return LoadTableResult{}, err
	}
	if ok {
		a.Metrics.Committed(in.Pipeline, in.Table().String(), pos.Position.LSN)
	}
	w, err := a.window(ctx, in.TableConfig, pos, ok, in.Window)
	if err != nil {
		return LoadTableResult{}, fmt.Errorf("loading table %s: %w", in.Table(), err)
	}
	return LoadTableResult{Position: pos, HasPosition: ok, Staged: w.Refs, More: w.Staged - len(w.Refs), StagedHi: w.Hi}, nil
}

// NextBatchesInput asks for the staged batches of a table after its committed position.
type NextBatchesInput struct {
	Table       TableConfig          `json:"table"`
	After       batch.SourcePosition `json:"after"`
	HasPosition bool                 `json:"has_position"`
	Window      WindowLimit          `json:"window,omitzero"`
}

// NextBatchesResult is a window of staged batches in commit order.
type NextBatchesResult struct {
	Refs []staging.BatchRef `json:"refs"`
	// More is how many staged batches the table needs beyond Refs (0: Refs is all of them).
	More int `json:"more,omitempty"`
	// StagedHi is the highest hi of every staged batch the table needs (how far its lag reaches).
	StagedHi batch.SourcePosition `json:"staged_hi,omitzero"`
}

// NextBatches lists the first window of staged batches whose hi is after in.After (all staged
// batches when in.HasPosition is false), in commit order: the TableWorkflow's durable queue is
// the staging store, read a window at a time. It only lists, so it is idempotent. Staged
// batches of another source than in.After are a non-retryable SourceMismatch error.
func (a *Commit) NextBatches(ctx context.Context, in NextBatchesInput) (_ NextBatchesResult, err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in.Table); err != nil {
		return NextBatchesResult{}, err
	}
	w, err := a.window(ctx, in.Table, in.After, in.HasPosition, in.Window)
	if err != nil {
		return NextBatchesResult{}, fmt.Errorf("listing staged batches of table %s: %w", in.Table.Table(), err)
	}
	return NextBatchesResult{Refs: w.Refs, More: w.Staged - len(w.Refs), StagedHi: w.Hi}, nil
}

func (a *Commit) window(ctx context.Context, in TableConfig, after batch.SourcePosition, has bool, l WindowLimit) (staging.Window, error) {
	return commit.Window(ctx, a.Staging, in, after, has, l.refs(), l.Bytes)
}
