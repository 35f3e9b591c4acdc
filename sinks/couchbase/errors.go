package couchbase

import (
	"context"
	"errors"
	"fmt"

	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/sinks"
)

// classify marks err as poison when retrying cannot fix it, and leaves it unmarked (transient)
// otherwise: timeouts, temporary failures, overload, unreachable nodes. A timeout is also checked
// against the bucket's collections: a target or metadata collection that no longer exists makes
// operations time out (the client retries waiting for it), and that is poison.
func (s *Sink) classify(ctx context.Context, t target, err error) error {
	switch {
	case err == nil || sinks.IsPoison(err):
		return err
	case errors.Is(err, gocb.ErrValueTooLarge):
		return sinks.Poisonf("table %s: %w; Couchbase documents hold at most 20 MiB: shrink the row in Postgres "+
			"or leave the large column out of the publication", t.table, err)
	case errors.Is(err, gocb.ErrInvalidArgument):
		return sinks.Poisonf("table %s: Couchbase rejected the operation as invalid (a key or a value it cannot "+
			"store): %w", t.table, err)
	case errors.Is(err, gocb.ErrDurabilityImpossible), errors.Is(err, gocb.ErrDurabilityLevelNotAvailable),
		errors.Is(err, gocb.ErrFeatureNotAvailable):
		return sinks.Poisonf("table %s: bucket %s cannot give durability %q (more replicas configured than "+
			"data nodes, or a server without durable writes): add nodes, lower the bucket's replicas, or set "+
			"sink.couchbase.durability (none risks losing rows on failover): %w", t.table, s.cfg.Bucket,
			s.cfg.Durability, err)
	case errors.Is(err, gocb.ErrBucketNotFound):
		return sinks.Poisonf("table %s: bucket %s does not exist; create it or fix sink.couchbase.bucket: %w",
			t.table, s.cfg.Bucket, err)
	case errors.Is(err, gocb.ErrCollectionNotFound), errors.Is(err, gocb.ErrScopeNotFound):
		return s.goneError(t, err)
	case errors.Is(err, gocb.ErrTimeout) && ctx.Err() == nil:
		if missing := s.missingCollection(ctx, t); missing != "" {
			return s.goneError(t, fmt.Errorf("collection %s does not exist: %w", missing, err))
		}
	}
	return err
}

// goneError is the poison error of a target whose collection was dropped while it ran.
func (s *Sink) goneError(t target, err error) error {
	return sinks.Poisonf("table %s: a collection of target %s in bucket %s is gone (dropped while the pipeline "+
		"ran?); resume the table: Sluice creates the collection again and backfills it: %w", t.table, t, s.cfg.Bucket, err)
}

// missingCollection returns the name of the target's document or metadata collection when it
// does not exist, or "" when both exist or that cannot be checked.
func (s *Sink) missingCollection(ctx context.Context, t target) string {
	have, err := s.collections(ctx)
	if err != nil {
		return ""
	}
	for _, c := range []string{t.collection, t.meta} {
		if !have[t.scope+"."+c] {
			return t.scope + "." + c
		}
	}
	return ""
}
