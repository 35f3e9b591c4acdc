package couchbase

import (
	"context"
	"errors"
	"fmt"

	"github.com/couchbase/gocb/v2"
	"golang.org/x/sync/errgroup"
)

// writeDocs applies ops to the target collection by the fence rule, with at most
// Config.Concurrency documents in flight: a row is written only over an older image or none,
// never over a newer one, and a delete leaves a tombstone carrying its position. src is the
// batch's source (empty for a snapshot chunk). It works in two passes: it reads every key's fence
// and decides its write, then, when index is not nil, passes it the keys whose write creates a
// document that key index ix may not list, and only once index has returned writes the
// documents, recording ix in their fences.
// Keys are unique, so the order of the operations does not matter. It stops at the first error
// and returns it.
func (s *Sink) writeDocs(ctx context.Context, t target, ops []docOp, src, ix string, index func(context.Context, []string) error) error {
	col := s.collection(t)
	states, steps := make([]docState, len(ops)), make([]step, len(ops))
	err := s.each(ctx, len(ops), func(ctx context.Context, i int) error {
		st, err := s.fenceRead(ctx, col, ops[i].key)
		if err == nil {
			states[i] = st
			steps[i], err = decide(st, ops[i].body != nil, ops[i].pos, src)
		}
		if err != nil {
			return s.classify(ctx, t, fmt.Errorf("reading document %q of %s: %w", shorten(ops[i].key), t, err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if index != nil {
		var keys []string
		for i, op := range ops {
			if creates(states[i], steps[i], ix) {
				keys = append(keys, op.key)
			}
		}
		if err := index(ctx, keys); err != nil {
			return err
		}
	}
	return s.each(ctx, len(ops), func(ctx context.Context, i int) error {
		op := ops[i]
		if err := s.fenceWrite(ctx, col, op, src, ix, states[i], steps[i], index == nil); err != nil {
			what := "upserting"
			if op.body == nil {
				what = "removing"
			}
			return s.classify(ctx, t, fmt.Errorf("%s document %q of %s: %w", what, shorten(op.key), t, err))
		}
		return nil
	})
}

// each runs fn for 0..n-1 with at most Config.Concurrency in flight, stopping at the first
// error.
func (s *Sink) each(ctx context.Context, n int, fn func(context.Context, int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.Concurrency)
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, i) })
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
	col := s.collection(t)
	return s.each(ctx, len(keys), func(ctx context.Context, i int) error {
		_, err := col.MutateIn(keys[i], []gocb.MutateInSpec{
			gocb.UpsertSpec(fenceXattr, newFence("", ""), &gocb.UpsertSpecOptions{IsXattr: true}),
			gocb.RemoveSpec("", nil),
		}, &gocb.MutateInOptions{DurabilityLevel: s.durability, Timeout: s.cfg.Timeout.D(), Context: ctx})
		if err == nil || errors.Is(err, gocb.ErrDocumentNotFound) {
			return nil
		}
		return s.classify(ctx, t, fmt.Errorf("removing document %q from %s: %w", shorten(keys[i]), t, err))
	})
}
