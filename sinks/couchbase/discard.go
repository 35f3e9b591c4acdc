package couchbase

import (
	"context"

	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// DiscardSnapshot removes every document of the target (a partially applied snapshot, or a
// target that has streamed, for a resync), its key index and its checkpoint, leaving the target
// empty and without a position. It first marks the checkpoint as discarding (Position then
// reports none), removes the documents listed in the key index (chunks of batches that never
// committed included), then the index, then the checkpoint; an interrupted discard is finished by
// the next DiscardSnapshot or Apply. A target that began streaming under a Sluice version that
// did not index stream-phase keys cannot be emptied: the call is poison. Idempotent.
func (s *Sink) DiscardSnapshot(ctx context.Context, spec sinks.TableSpec) error {
	t, err := s.parseTarget(spec)
	if err != nil {
		return err
	}
	cp, err := s.readCheckpoint(ctx, t)
	if err != nil {
		return err
	}
	if !cp.indexComplete() && !cp.Discarding {
		return sinks.Poisonf("table %s: Couchbase target %s began streaming under a Sluice version that did not "+
			"index the keys of stream-phase documents; Sluice cannot empty it: drop collection %s of bucket %s "+
			"(or remove its documents) and the checkpoint %s from %s.%s, then resume the table",
			t.table, t, t, s.cfg.Bucket, t.checkpointKey(), t.scope, t.meta)
	}
	return s.discard(ctx, t, cp)
}

// discard does DiscardSnapshot's work from the checkpoint read as cp.
func (s *Sink) discard(ctx context.Context, t target, cp stored) error {
	if cp.exists && !cp.Discarding {
		mark := cp.checkpoint
		mark.Discarding, mark.Position, mark.Phase = true, nil, ""
		var err error
		if cp, err = s.writeCheckpoint(ctx, t, cp, mark); err != nil {
			return err
		}
	}
	keys, chunks, err := s.readIndex(ctx, t)
	if err != nil {
		return err
	}
	if err := s.removeKeys(ctx, t, keys); err != nil {
		return err
	}
	if err := s.removeIndex(ctx, t, chunks); err != nil {
		return err
	}
	if err := s.removeCheckpoint(ctx, t, cp); err != nil {
		return err
	}
	if cp.exists || chunks > 0 {
		s.log.InfoContext(ctx, "discarded partial snapshot", logkey.Table, t.table, logkey.Target, t.String(),
			logkey.Documents, len(keys), logkey.IndexChunks, chunks)
	}
	return nil
}
