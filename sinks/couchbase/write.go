package couchbase

import (
	"context"
	"errors"
	"fmt"

	"github.com/couchbase/gocb/v2"
	"golang.org/x/sync/errgroup"
)

// writeDocs applies ops to the target collection by the fence rule (fenceWrite), with at most
// Config.Concurrency documents in flight: a row is written only over an older image or none,
// never over a newer one, and a delete leaves a tombstone carrying its position. src is the
// batch's source (empty for a snapshot chunk). Keys are unique, so the order of the operations
// does not matter. It stops at the first error and returns it.
func (s *Sink) writeDocs(ctx context.Context, t target, ops []docOp, src string) error {
	col := s.collection(t)
	return s.each(ctx, ops, func(ctx context.Context, op docOp) error {
		if err := s.fenceWrite(ctx, col, op, src); err != nil {
			what := "upserting"
			if op.body == nil {
				what = "removing"
			}
			return s.classify(ctx, t, fmt.Errorf("%s document %q of %s: %w", what, shorten(op.key), t, err))
		}
		return nil
	})
}

// each runs fn for every op with at most Config.Concurrency in flight, stopping at the first
// error.
func (s *Sink) each(ctx context.Context, ops []docOp, fn func(context.Context, docOp) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.Concurrency)
	for _, op := range ops {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, op) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// removeKeys removes the documents with keys from the target (missing ones are success), with
// bounded concurrency, without the fence rule: DiscardSnapshot empties a target that has no
// committed position, so there is no newer row to protect, and the removal also clears the
// fence, so that a new snapshot (of another source, or at the same position) is written in full.
func (s *Sink) removeKeys(ctx context.Context, t target, keys []string) error {
	ops := make([]docOp, len(keys))
	for i, k := range keys {
		ops[i] = docOp{key: k}
	}
	col := s.collection(t)
	return s.each(ctx, ops, func(ctx context.Context, op docOp) error {
		_, err := col.MutateIn(op.key, []gocb.MutateInSpec{
			gocb.UpsertSpec(fenceXattr, newFence("", ""), &gocb.UpsertSpecOptions{IsXattr: true}),
			gocb.RemoveSpec("", nil),
		}, &gocb.MutateInOptions{DurabilityLevel: s.durability, Timeout: s.cfg.Timeout.D(), Context: ctx})
		if err == nil || errors.Is(err, gocb.ErrDocumentNotFound) {
			return nil
		}
		return s.classify(ctx, t, fmt.Errorf("removing document %q from %s: %w", shorten(op.key), t, err))
	})
}
