package couchbase

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// Options are the sink's dependencies.
type Options struct {
	// Logger receives the sink's logs; nil means slog.Default().
	Logger *slog.Logger
	// Now returns the current time (for checkpoint timestamps); nil means time.Now.
	Now func() time.Time
}

// Sink writes batches into the collections of one Couchbase bucket. It is safe for concurrent use
// by different tables.
type Sink struct {
	cfg        Config
	cluster    *gocb.Cluster
	bucket     *gocb.Bucket
	durability gocb.DurabilityLevel
	log        *slog.Logger
	now        func() time.Time
	// metaSeen holds the scopes whose metadata collection is known to exist (scope name -> true).
	metaSeen sync.Map
	// revive says the server revives a tombstone by compare-and-swap (see reviveSpecs).
	revive bool
	// afterGuard, when set (by tests only), runs in Apply after the checkpoint was read and the
	// guard passed, before the documents are written: where a stale attempt is overtaken.
	afterGuard func(context.Context)
	// beforeCheckpoint, when set (by tests only), runs in Apply after every document was written,
	// before the checkpoint: where a crash leaves the documents ahead of the position.
	beforeCheckpoint func(context.Context)
}

var _ sinks.Sink = (*Sink)(nil)

// New validates cfg (config.Couchbase.Validate, which fills in its defaults), connects to the cluster and waits until the bucket is ready (bounded by
// ctx and Config.Timeout). The caller closes the sink.
func New(ctx context.Context, cfg Config, opts Options) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	durability, err := durabilityLevel(cfg.Durability)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout.D()
	cluster, err := gocb.Connect(cfg.ConnStr, gocb.ClusterOptions{
		Authenticator:  gocb.PasswordAuthenticator{Username: cfg.Username, Password: cfg.Password},
		TimeoutsConfig: gocb.TimeoutsConfig{ConnectTimeout: timeout, KVTimeout: timeout, KVDurableTimeout: timeout, ManagementTimeout: timeout},
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to Couchbase (sink.couchbase.connstr): %w", err)
	}
	bucket := cluster.Bucket(cfg.Bucket)
	if err := bucket.WaitUntilReady(timeout, &gocb.WaitUntilReadyOptions{Context: ctx}); err != nil {
		_ = cluster.Close(nil)
		return nil, fmt.Errorf("waiting for bucket %s (sink.couchbase.bucket; check it exists and user %s may "+
			"read and write it): %w", cfg.Bucket, cfg.Username, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Sink{cfg: cfg, cluster: cluster, bucket: bucket, durability: durability, revive: reviveSupported(bucket),
		log: log.With(logkey.Sink, "couchbase"), now: now}, nil
}

// Close disconnects from the cluster.
func (s *Sink) Close(context.Context) error {
	if err := s.cluster.Close(nil); err != nil {
		return fmt.Errorf("closing the Couchbase connection: %w", err)
	}
	return nil
}

// collection returns the target's document collection.
func (s *Sink) collection(t target) *gocb.Collection {
	return s.bucket.Scope(t.scope).Collection(t.collection)
}

// meta returns the collection that holds the target's checkpoint and key index.
func (s *Sink) meta(t target) *gocb.Collection {
	return s.bucket.Scope(t.scope).Collection(t.meta)
}

// collections returns the bucket's collections as scope.collection.
func (s *Sink) collections(ctx context.Context) (map[string]bool, error) {
	scopes, err := s.bucket.CollectionsV2().GetAllScopes(&gocb.GetAllScopesOptions{Context: ctx, Timeout: s.cfg.Timeout.D()})
	if err != nil {
		return nil, fmt.Errorf("listing the collections of bucket %s: %w", s.cfg.Bucket, err)
	}
	have := map[string]bool{}
	for _, sc := range scopes {
		have[sc.Name] = true
		for _, c := range sc.Collections {
			have[sc.Name+"."+c.Name] = true
		}
	}
	return have, nil
}

// EnsureTable checks spec (a key, metadata names, a valid target) and creates the target's scope,
// its collection and the scope's metadata collection when missing. When the target collection was
// missing, a checkpoint left for it is removed, so the table is backfilled. Documents have no
// schema, so added, dropped and retyped columns need nothing: later documents carry the new
// columns. Idempotent.
func (s *Sink) EnsureTable(ctx context.Context, spec sinks.TableSpec) error {
	t, err := s.parseTarget(spec)
	if err != nil {
		return err
	}
	if _, err := newLayout(spec); err != nil {
		return err
	}
	if _, err := batch.ArrowSchema(spec.Schema); err != nil {
		return sinks.Poisonf("table %s: mapping the schema to Arrow: %w", t.table, err)
	}
	have, err := s.collections(ctx)
	if err != nil {
		return err
	}
	mgr := s.bucket.CollectionsV2()
	if !have[t.scope] {
		err := mgr.CreateScope(t.scope, &gocb.CreateScopeOptions{Context: ctx, Timeout: s.cfg.Timeout.D()})
		if err != nil && !errors.Is(err, gocb.ErrScopeExists) {
			return fmt.Errorf("table %s: creating scope %s in bucket %s (the user needs the bucket admin role, "+
				"or create it yourself): %w", t.table, t.scope, s.cfg.Bucket, err)
		}
		s.log.InfoContext(ctx, "created scope", logkey.Table, t.table, logkey.Scope, t.scope)
	}
	for _, c := range []string{t.meta, t.collection} {
		if have[t.scope+"."+c] {
			continue
		}
		err := mgr.CreateCollection(t.scope, c, nil, &gocb.CreateCollectionOptions{Context: ctx, Timeout: s.cfg.Timeout.D()})
		if err != nil && !errors.Is(err, gocb.ErrCollectionExists) {
			return fmt.Errorf("table %s: creating collection %s.%s in bucket %s (the user needs the bucket admin "+
				"role, or create it yourself): %w", t.table, t.scope, c, s.cfg.Bucket, err)
		}
		s.log.InfoContext(ctx, "created collection", logkey.Table, t.table, logkey.Collection, t.scope+"."+c)
	}
	if !have[t.String()] {
		return s.dropStaleCheckpoint(ctx, t)
	}
	return nil
}

// dropStaleCheckpoint removes the checkpoint and key index of a target whose collection did not
// exist (dropped, or never created): they describe documents that are gone, and keeping the
// position would stream into an empty collection without a backfill.
func (s *Sink) dropStaleCheckpoint(ctx context.Context, t target) error {
	cp, err := s.readCheckpoint(ctx, t)
	if err != nil || !cp.exists {
		return err
	}
	s.log.WarnContext(ctx, "target collection was missing; removing its checkpoint so the table is backfilled",
		logkey.Table, t.table, logkey.Target, t.String())
	return s.discard(ctx, t, cp)
}

// Position returns the position in the target's checkpoint document; ok is false when there is
// none (a new target, or a discard under way). Before EnsureTable has created the scope's
// metadata collection there is no checkpoint, and Position says so without waiting for one.
func (s *Sink) Position(ctx context.Context, spec sinks.TableSpec) (batch.SourcePosition, bool, error) {
	t, err := s.parseTarget(spec)
	if err != nil {
		return batch.SourcePosition{}, false, err
	}
	if _, seen := s.metaSeen.Load(t.scope); !seen {
		have, err := s.collections(ctx)
		if err != nil {
			return batch.SourcePosition{}, false, err
		}
		if !have[t.scope+"."+t.meta] {
			return batch.SourcePosition{}, false, nil
		}
		s.metaSeen.Store(t.scope, true)
	}
	cp, err := s.readCheckpoint(ctx, t)
	if err != nil {
		return batch.SourcePosition{}, false, err
	}
	pos, ok := cp.committed()
	return pos, ok, nil
}
