package couchbase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/couchbase/gocb/v2"
	"golang.org/x/sync/errgroup"
)

// writeDocs applies ops to the target collection with at most Config.Concurrency operations in
// flight: an upsert of each body, a remove of each key without one (a missing document is
// success). Keys are unique, so the order of the operations does not matter. It stops at the
// first error and returns it.
func (s *Sink) writeDocs(ctx context.Context, t target, ops []docOp) error {
	col := s.collection(t)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.Concurrency)
	for _, op := range ops {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return s.writeDoc(gctx, t, col, op) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// writeDoc applies one operation.
func (s *Sink) writeDoc(ctx context.Context, t target, col *gocb.Collection, op docOp) error {
	if op.body == nil {
		_, err := col.Remove(op.key, &gocb.RemoveOptions{DurabilityLevel: s.durability, Timeout: s.cfg.Timeout.D(), Context: ctx})
		if err == nil || errors.Is(err, gocb.ErrDocumentNotFound) {
			return nil
		}
		return s.classify(ctx, t, fmt.Errorf("removing document %q from %s: %w", shorten(op.key), t, err))
	}
	_, err := col.Upsert(op.key, json.RawMessage(op.body), &gocb.UpsertOptions{
		DurabilityLevel: s.durability, Timeout: s.cfg.Timeout.D(), Context: ctx, Transcoder: gocb.NewRawJSONTranscoder(),
	})
	if err != nil {
		return s.classify(ctx, t, fmt.Errorf("upserting document %q into %s: %w", shorten(op.key), t, err))
	}
	return nil
}

// removeKeys removes the documents with keys from the target (missing ones are success), with
// bounded concurrency.
func (s *Sink) removeKeys(ctx context.Context, t target, keys []string) error {
	ops := make([]docOp, len(keys))
	for i, k := range keys {
		ops[i] = docOp{key: k}
	}
	return s.writeDocs(ctx, t, ops)
}
