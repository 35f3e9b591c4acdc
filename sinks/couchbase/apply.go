package couchbase

import (
	"context"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// Apply writes b's documents, then b.Hi into the target's checkpoint document. A snapshot chunk
// (zero Hi) writes its documents and leaves the committed position as it was; a batch without
// rows commits its Hi alone. It is not one
// Couchbase transaction: the documents are written first, with bounded concurrency, and the
// checkpoint last, by compare-and-swap. A crash in between leaves the checkpoint at the previous
// batch, so the batch is applied again in full and converges (the package doc says why that
// loses nothing and resurrects nothing). A batch whose Hi the checkpoint already covers is
// skipped and rows at or below the checkpoint are dropped, so a replay cannot move the target
// back; a checkpoint of another source is poison.
//
// In the snapshot phase the keys of upserted documents are first written to the target's key
// index, so DiscardSnapshot can find them. The first stream-phase batch retires the index.
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
	// A snapshot chunk (zero Hi) writes rows only; other batches are checked against the
	// checkpoint and lose their rows at or below it.
	chunk := b.Hi.Position.IsZero()
	var after *batch.Position
	if !chunk {
		if done, err := s.covered(ctx, t, cp, b); done || err != nil {
			return err
		}
		if committed, ok := cp.committed(); ok {
			after = &committed.Position
		}
	}
	var ops []docOp
	if b.Record != nil {
		if ops, err = l.plan(b.Record, after); err != nil {
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
	s.log.InfoContext(ctx, "finishing an interrupted discard before the batch", "table", t.table, "target", t.String())
	if err := s.discard(ctx, t, cp); err != nil {
		return stored{}, err
	}
	return s.readCheckpoint(ctx, t)
}

// commit writes the key index (snapshot phase), the documents, and then the checkpoint.
func (s *Sink) commit(ctx context.Context, t target, cp stored, b sinks.Batch, ops []docOp) error {
	next := cp.checkpoint
	if b.Phase == batch.PhaseSnapshot && !cp.Streaming {
		var keys []string
		for _, op := range ops {
			if op.body != nil {
				keys = append(keys, op.key)
			}
		}
		n, err := s.writeIndex(ctx, t, cp.IndexChunks, keys)
		if err != nil {
			return err
		}
		next.IndexChunks += n
	}
	if err := s.writeDocs(ctx, t, ops); err != nil {
		return err
	}
	retire := b.Phase == batch.PhaseStream && !cp.Streaming
	if retire {
		next.Streaming, next.IndexChunks = true, 0
	}
	if !b.Hi.Position.IsZero() {
		hi := b.Hi
		next.Position, next.Phase = &hi, string(b.Phase)
	}
	if _, err := s.writeCheckpoint(ctx, t, cp, next); err != nil {
		return err
	}
	s.log.DebugContext(ctx, "committed batch", "table", t.table, "target", t.String(), "position", b.Hi.String(),
		"documents", len(ops), "phase", string(b.Phase))
	if retire {
		s.retireIndex(ctx, t)
	}
	return nil
}

// covered reports whether the checkpoint already holds b.Hi. A position of another source is
// poison: the order is undefined and the target belongs to another stream.
func (s *Sink) covered(ctx context.Context, t target, cp stored, b sinks.Batch) (bool, error) {
	committed, ok := cp.committed()
	if !ok {
		return false, nil
	}
	c, err := committed.Compare(b.Hi)
	if err != nil {
		return false, sinks.Poisonf("table %s: Couchbase target %s holds position %s of another source than "+
			"batch %s: %w; the target was replicated from another cluster or slot: discard it and resync",
			t.table, t, committed, b.Hi, err)
	}
	if c >= 0 {
		s.log.InfoContext(ctx, "batch already committed, skipping", "table", t.table,
			"position", b.Hi.String(), "committed", committed.String())
		return true, nil
	}
	return false, nil
}

// retireIndex removes the key index once streaming has begun. The index is no longer read, so a
// failure only leaves garbage in the metadata collection: it is logged, not returned.
func (s *Sink) retireIndex(ctx context.Context, t target) {
	n, err := s.countIndex(ctx, t)
	if err == nil && n > 0 {
		err = s.removeIndex(ctx, t, n)
	}
	if err != nil {
		s.log.WarnContext(ctx, "could not remove the retired key index; its documents stay in the metadata collection",
			"table", t.table, "target", t.String(), "error", err)
	}
}
