package reader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/metrics"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// Defaults of a run (the batch limits' are batch.Limits.WithDefaults).
const (
	defaultRunFor    = time.Hour
	defaultListEvery = 5 * time.Second
)

// Config says what one run reads, how it cuts batches and for how long.
type Config struct {
	Pipeline string
	// Source is the source the positions of the staged batches belong to.
	Source batch.SourceID
	// SlotSince is the slot's creation point as the pipeline's setup recorded it (0: unknown):
	// it keys the slot's mark in Deps.Marks.
	SlotSince uint64
	// Schemas are the pipeline's tables as set up; the stream's SchemaEvents change them.
	Schemas []batch.Schema
	// Limits cut a table's batch at MaxRows rows, MaxBytes bytes or MaxWait after its first
	// row, whichever comes first. A zero field takes its default (batch.DefaultMaxRows,
	// DefaultMaxBytes, DefaultMaxWait).
	Limits batch.Limits
	// RunFor bounds the run; 0 means an hour.
	RunFor time.Duration
	// ListEvery is how often the run lists the staging store to learn which batches were
	// acknowledged (which lets it confirm the slot further); 0 means 5 seconds.
	ListEvery time.Duration
	// Compression of the staged batch files; empty means batch.DefaultCompression (LZ4).
	Compression batch.Compression
	// Publication is the pipeline's publication, whose marker the identity check records.
	Publication string
	// OnRecreate is each table's tables[].on_recreate (RecreateStop when missing).
	OnRecreate map[batch.TableName]string
	// OnDropColumn is each table's tables[].on_drop_column: "keep" follows a DROP COLUMN from
	// the stream; anything else (a table not in it too) resyncs the table (droppedResync).
	OnDropColumn map[batch.TableName]string
}

// Stream is the replication stream of the pipeline's slot (a *source.Stream).
type Stream interface {
	// Run streams until ctx ends or h or the connection fails (see source.Stream.Run).
	Run(ctx context.Context, h source.Handler) error
	// Confirmed returns the last position confirmed to the slot.
	Confirmed() uint64
}

// Fetcher reads from the source what the stream leaves out (a *source.Fetcher).
type Fetcher interface {
	// Fill sets the unchanged TOAST values of changes (see source.Fetcher.Fill).
	Fill(ctx context.Context, schema batch.Schema, changes []batch.Change) ([]batch.Change, error)
	// ColumnsWithDefaults returns which of a table's columns cols have a default.
	ColumnsWithDefaults(ctx context.Context, table batch.TableName, cols []string) ([]string, error)
	// Attnums returns the catalog's attnums of the columns of s (see source.Fetcher.Attnums).
	Attnums(ctx context.Context, s batch.Schema) (map[string]int16, error)
	// Close closes the fetcher's connection.
	Close(ctx context.Context) error
}

// Store is the pipeline's staging store (a *staging.Store).
type Store interface {
	Lister
	// Put stages one batch file and returns its ref with the URI set; re-staging a range
	// overwrites it.
	Put(ctx context.Context, ref staging.BatchRef, data io.Reader) (staging.BatchRef, error)
}

// Tables delivers to the tables' workflows. A table is named by its current schema, which
// changes with the stream's SchemaEvents. Both methods are idempotent and safe for concurrent
// use.
type Tables interface {
	// SignalBatches delivers staged batches (in the order they were staged) to their table in
	// one signal, starting the table when it does not run.
	SignalBatches(ctx context.Context, schema batch.Schema, refs []staging.BatchRef) error
	// Resync asks the table to discard its target and backfill it again from a new snapshot.
	Resync(ctx context.Context, schema batch.Schema) error
}

// Deps are what a run reads from and writes to.
type Deps struct {
	Store  Store
	Tables Tables
	// Marks, when set, keeps the furthest position confirmed to the slot, so that a slot
	// created again under the same name is recognized (SlotLost); nil skips the check.
	Marks Marks
	// OpenFetcher connects the run's fetcher; the run closes it.
	OpenFetcher func(ctx context.Context) (Fetcher, error)
	// NewStream returns the run's stream with the given options; it connects to nothing yet.
	NewStream func(opts source.StreamOptions) (Stream, error)
	// Heartbeat, when set, reports the run's progress at every ProgressEvent of the stream.
	Heartbeat func(ctx context.Context, progress Result)
	// Metrics records what the run reads and what each table holds in staging; nil records
	// nothing.
	Metrics *metrics.Metrics
	// Published reports whether a table is in the pipeline's publication now (not as of the
	// WAL being decoded): it tells a table removed from the config, whose changes hold the slot,
	// from one forgotten by `sluice remove`, whose changes are skipped. Nil counts every table
	// as published.
	Published func(ctx context.Context, table batch.TableName) (bool, error)
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// CatalogWatch, when set, is checked at the run's start, at every RELATION of a table and
	// every ListEvery for rewrites and partition changes the WAL cannot show (checkCatalog).
	CatalogWatch CatalogWatch
	// SchemaRecords, when set, keeps the schema the reader last followed per table
	// (recordedSchemas); nil starts every run from the catalog's schemas.
	SchemaRecords staging.State
	// Identities, when set, keeps the identity each table's sink corresponds to (its relation
	// OID, its publication membership, the publication's flags), checked at the run's start, at
	// every RELATION of the table and every ListEvery (see checkIdentity); nil checks nothing.
	Identities staging.State
	// Republish, when set, adds the configured tables that left the publication back to it (as
	// the pipeline's setup does) and returns those it added.
	Republish func(ctx context.Context) ([]batch.TableName, error)
}

// Result reports one run.
type Result struct {
	Position  batch.SourcePosition // everything up to here is staged
	Confirmed batch.SourcePosition // the slot is confirmed up to here
	Batches   int64
	Rows      int64
	// Signals is how many signals delivered the batches to their tables (several batches of a
	// table staged close together share one).
	Signals int64
	// Held are the tables of the publication that the run does not read (removed from the
	// config) whose changes it met: the slot is held at the first of them (see unlistedTable).
	Held []HeldTable
}

// Read streams the pipeline's slot until cfg.RunFor passes (a clean end: nil), ctx ends or a
// failure. It splits changes per table, cuts batches, stages each (the file first, then the
// table's signal, so a table never holds a ref to nothing) and confirms the slot only up to what
// no table still holds: buffered changes and staged batches that their table has not committed
// and acknowledged. A TRUNCATE of a table, columns added with a default, or columns dropped ask
// that table to resync. On a failure the Result says what the run did until then.
func Read(ctx context.Context, cfg Config, deps Deps) (Result, error) {
	f, err := deps.OpenFetcher(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("connecting to the source of pipeline %s: %w", cfg.Pipeline, err)
	}
	var records map[batch.TableName]schemaRecord
	if deps.SchemaRecords != nil {
		if records, err = recordedSchemas(ctx, &cfg, deps.SchemaRecords, f); err != nil {
			_ = f.Close(context.WithoutCancel(ctx))
			return Result{}, err
		}
	}
	r, err := newRun(ctx, cfg, deps, f)
	if err != nil {
		return Result{}, err
	}
	r.records = records
	defer r.close(ctx)
	return r.run(ctx)
}

// run is one Read: the per-table buffers and the state it reports.
type run struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	now     func() time.Time
	held    *held
	fetcher Fetcher
	tables  map[batch.TableName]*table
	cuts    []batch.Cut
	result  Result
	maxWait time.Duration
	// caughtUp is set at the first ProgressEvent.CaughtUp: the backlog the run started with has
	// been read.
	caughtUp bool
	// reading is the LSN of the last commit read (the listing goroutine reads it for the lag).
	reading atomic.Uint64
	// messages and staged count changes received and bytes staged since the last tick, for the
	// metrics (added there in one step, not per change).
	messages, staged int64
	// unlisted are the tables met in the stream that the run does not read, and whether each
	// holds the slot (see unlistedTable).
	unlisted map[batch.TableName]bool
	// catalogChecked is when the catalog watch last ran for every table, and stopping the
	// reason each table was last stopped for (logged once).
	catalogChecked time.Time
	stopping       map[batch.TableName]string
	// records are the schemas recorded per table (recordedSchemas), nil without SchemaRecords.
	records map[batch.TableName]schemaRecord
	// identities are the identities recorded per table (identityRecord), and identityChecked
	// when the periodic check last ran.
	identities      map[batch.TableName]identityRecord
	identityChecked time.Time
}

// table is one table's buffer, collapser and record builder.
type table struct {
	schema  batch.Schema
	buf     *batch.Buffer
	col     *batch.Collapser
	rec     *batch.RecordBuilder
	first   batch.Position
	pending bool
	// unsignalled are staged batches not yet signalled to the table (in staging order), and
	// signalled when the table's last signal was sent: see queueSignal.
	unsignalled []staging.BatchRef
	signalled   time.Time
}

// tickEvery is how often the reader checks its buffers for batches whose MaxWait has passed: a
// tenth of it, between 10 ms and 1 s, so a batch is cut at most that late. (Every check was a
// second apart before, which held a batch up to a second past its MaxWait: a flush interval of
// 1 s cut batches 1-2 s after their first row.)
func tickEvery(maxWait time.Duration) time.Duration {
	return min(max(maxWait/10, 10*time.Millisecond), time.Second)
}

// newRun builds the run of cfg around its fetcher f, which the run closes (also when newRun fails).
func newRun(ctx context.Context, cfg Config, deps Deps, f Fetcher) (*run, error) {
	limits := cfg.Limits.WithDefaults()
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &run{cfg: cfg, deps: deps, log: log, now: now, held: newHeld(now), fetcher: f,
		tables: map[batch.TableName]*table{}, maxWait: limits.MaxWait}
	r.result.Position = batch.SourcePosition{Source: cfg.Source}
	for _, s := range cfg.Schemas {
		t := &table{}
		var err error
		if t.buf, err = batch.NewBuffer(s.Table, limits); err != nil {
			r.close(ctx)
			return nil, failure.New(failure.SourceSetup, err.Error(), err)
		}
		if err := t.setSchema(s); err != nil {
			r.close(ctx)
			return nil, err
		}
		r.tables[s.Table] = t
	}
	return r, nil
}

func (t *table) setSchema(s batch.Schema) error {
	col, err := batch.NewCollapser(s)
	if err != nil {
		return failure.New(failure.SourceSetup, err.Error(), err)
	}
	rec, err := batch.NewRecordBuilder(memory.DefaultAllocator, s)
	if err != nil {
		return failure.New(failure.SourceSetup, fmt.Sprintf("table %s: %v", s.Table, err), err)
	}
	if t.rec != nil {
		t.rec.Release()
	}
	t.schema, t.col, t.rec = s, col, rec
	return nil
}

func (r *run) close(ctx context.Context) {
	for _, t := range r.tables {
		if t.rec != nil {
			t.rec.Release()
		}
	}
	if r.fetcher != nil {
		_ = r.fetcher.Close(context.WithoutCancel(ctx))
	}
}

// run streams until RunFor passes (a clean end: the workflow continues as new) or a failure.
func (r *run) run(ctx context.Context) (Result, error) {
	if err := r.listStaged(ctx); err != nil {
		return r.result, fmt.Errorf("listing staged batches of pipeline %s: %w", r.cfg.Pipeline, err)
	}
	if r.deps.Identities != nil {
		if err := r.loadIdentities(ctx); err != nil {
			return r.result, err
		}
		if err := r.checkIdentity(ctx, "at the reader's start", slices.Collect(maps.Keys(r.tables))); err != nil {
			return r.result, err
		}
		r.identityChecked = r.now()
	}
	stream, err := r.deps.NewStream(source.StreamOptions{Schemas: r.cfg.Schemas, Attnums: r.recordedAttnums(), Safe: r.held.safe, Logger: r.log,
		ProgressInterval: tickEvery(r.maxWait), BeforeLastStatus: r.refreshHeld, Confirms: r.confirms()})
	if err != nil {
		return r.result, fmt.Errorf("starting the stream of pipeline %s: %w", r.cfg.Pipeline, err)
	}
	runFor := r.cfg.RunFor
	if runFor <= 0 {
		runFor = defaultRunFor
	}
	runCtx, stop := context.WithTimeout(ctx, runFor)
	defer stop()
	listEvery := r.cfg.ListEvery
	if listEvery <= 0 {
		listEvery = defaultListEvery
	}
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return stream.Run(gctx, r.handle) })
	g.Go(func() error {
		t := time.NewTicker(listEvery)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
				if err := r.listStaged(gctx); err != nil && gctx.Err() == nil {
					r.log.Warn("listing staged batches; the slot is confirmed from the last listing", logkey.Error, err)
				}
			}
		}
	})
	err = g.Wait()
	if ctx.Err() == nil && (err == nil || errors.Is(err, context.DeadlineExceeded)) {
		// A clean end signals what it staged, so the tables need not wait for the next run to
		// read it again. (After a failure the next run re-reads and re-signals it: a staged batch
		// holds the slot until its table commits it.)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), signalAtEnd)
		if serr := r.signalAll(sctx); serr != nil {
			r.log.Warn("signalling the last staged batches; the next run reads them again", logkey.Error, serr)
		}
		cancel()
	}
	r.result.Confirmed = batch.SourcePosition{Source: r.cfg.Source, Position: batch.Position{LSN: stream.Confirmed()}}
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return r.result, nil // RunFor passed: buffered changes are re-read by the next run
	}
	if err == nil {
		return r.result, nil
	}
	if ctx.Err() != nil {
		return r.result, ctx.Err()
	}
	return r.result, fmt.Errorf("streaming pipeline %s: %w", r.cfg.Pipeline, err)
}

// refreshHeld lists the staged batches once more when the stream stops, so its last status
// update confirms what the tables committed since the previous listing (up to ListEvery ago): a
// clean stop and restart then does not read those transactions from the slot again.
func (r *run) refreshHeld(ctx context.Context) {
	if err := r.listStaged(ctx); err != nil {
		r.log.Warn("listing staged batches before the last status update; the slot is confirmed from the previous listing", logkey.Error, err)
	}
}

// listStaged lists the pipeline's staged batches for the held tracker and records what each
// table holds in the metrics.
func (r *run) listStaged(ctx context.Context) error {
	holds, err := r.held.refresh(ctx, r.deps.Store, r.cfg.Pipeline, r.reading.Load())
	if err != nil {
		return err
	}
	r.deps.Metrics.Staged(r.cfg.Pipeline, holds)
	return nil
}
