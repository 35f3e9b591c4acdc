package couchbase

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// Apply writes b's documents, then b.Hi into the target's checkpoint document. A snapshot chunk
// (zero Hi) writes its documents and leaves the committed position as it was; a batch without
// rows commits its Hi alone. It is not one
// Couchbase transaction: the documents are written first, with bounded concurrency, and the
// checkpoint last, by compare-and-swap. A crash in between leaves the checkpoint at the previous
// batch, so the batch is applied again in full and converges (the package doc says why that
// loses nothing and resurrects nothing). Its guard (see sinks.Sink) decides with batch.Covered
// from the checkpoint it read for the compare-and-swap: a batch the checkpoint covers is skipped
// and a partly covered one loses its rows at or below the checkpoint (batch.DropCovered), so a
// replay cannot move the target back; a checkpoint of another source is poison.
//
// The keys of documents it creates are first written to the target's key index, so
// DiscardSnapshot can find every document (in the stream phase too, so a streamed target can be
// resynced).
func (s *Sink) Apply(ctx context.Context, b sinks.Batch) error {
	t, err := s.parseTarget(b.Spec)
	if err != nil {
		return err
	}
	l, err := newLayout(b.Spec)
	if err != nil {
		return err
	}
	if b.Record != nil {
		if err := l.check(b.Record, b.Spec); err != nil {
			return err
		}
	}
	cp, err := s.begin(ctx, t)
	if err != nil {
		return err
	}
	rec, done, err := s.guard(ctx, t, cp, b)
	if done || err != nil {
		return err
	}
	var ops []docOp
	if rec != nil {
		defer rec.Release()
		if ops, err = l.plan(rec); err != nil {
			return err
		}
	}
	return s.commit(ctx, t, cp, b, ops)
}

// begin reads the target's checkpoint, finishing an interrupted discard first.
func (s *Sink) begin(ctx context.Context, t target) (stored, error) {
	cp, err := s.readCheckpoint(ctx, t)
	if err != nil || !cp.Discarding {
		return cp, err
	}
	s.log.InfoContext(ctx, "finishing an interrupted discard before the batch", logkey.Table, t.table, logkey.Target, t.String())
	if err := s.discard(ctx, t, cp); err != nil {
		return stored{}, err
	}
	return s.readCheckpoint(ctx, t)
}

// commit writes the documents, indexing the keys they create first (see writeDocs), and then
// the checkpoint.
func (s *Sink) commit(ctx context.Context, t target, cp stored, b sinks.Batch, ops []docOp) error {
	next := cp.checkpoint
	if next.Index == "" && cp.indexComplete() {
		next.Index = newIndexID()
	}
	var index func(context.Context, []string) error
	if next.Index != "" {
		index = func(ctx context.Context, keys []string) error {
			n, err := s.writeIndex(ctx, t, cp.IndexChunks, keys)
			next.IndexChunks = max(next.IndexChunks, n)
			return err
		}
	}
	if s.afterGuard != nil {
		s.afterGuard(ctx)
	}
	if err := s.writeDocs(ctx, t, ops, batchSource(b), next.Index, index); err != nil {
		return err
	}
	if b.Phase == batch.PhaseStream {
		next.Streaming = true
	}
	if !b.Hi.Position.IsZero() {
		hi := b.Hi
		next.Position, next.Phase = &hi, string(b.Phase)
	}
	if s.beforeCheckpoint != nil {
		s.beforeCheckpoint(ctx)
	}
	if _, err := s.writeCheckpoint(ctx, t, cp, next); err != nil {
		return err
	}
	s.log.DebugContext(ctx, "committed batch", logkey.Table, t.table, logkey.Target, t.String(), logkey.Position, b.Hi.String(),
		logkey.Documents, len(ops), logkey.Phase, string(b.Phase))
	return nil
}

// batchSource is the source of b's rows as fences record it: empty for a snapshot chunk, whose
// batch carries no position.
func batchSource(b sinks.Batch) string {
	if b.Hi.Position.IsZero() {
		return ""
	}
	return b.Hi.Source.String()
}

// guard applies the watermark rule (batch.Covered) to b and the checkpoint cp: done when the
// checkpoint covers the whole batch; otherwise the rows to write, trimmed of those at or below
// the checkpoint when it covers part of the batch (nil when b has no record; the caller releases
// it). A position of another source is poison: the order is undefined and the target belongs to
// another stream.
func (s *Sink) guard(ctx context.Context, t target, cp stored, b sinks.Batch) (rec arrow.RecordBatch, done bool, err error) {
	committed, ok := cp.committed()
	cover, err := batch.Covered(committed, ok, b.Phase, b.Lo, b.Hi)
	if err != nil {
		return nil, false, sinks.Poisonf("table %s: Couchbase target %s holds position %s of another source than "+
			"batch %s: %w; the target was replicated from another cluster or slot: discard it and resync",
			t.table, t, committed, b.Hi, err)
	}
	switch {
	case cover == batch.CoverAll:
		s.log.InfoContext(ctx, "batch already committed, skipping", logkey.Table, t.table,
			logkey.Position, b.Hi.String(), logkey.Committed, committed.String())
		return nil, true, nil
	case b.Record == nil:
		return nil, false, nil
	case cover == batch.CoverPart:
		rec, _, err := batch.DropCovered(memory.DefaultAllocator, b.Record, committed.Position)
		if err != nil {
			return nil, false, sinks.Poisonf("table %s: %w", t.table, err)
		}
		return rec, false, nil
	}
	b.Record.Retain()
	return b.Record, false, nil
}
