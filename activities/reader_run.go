package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// Default batch limits of the reader.
const (
	defaultMaxRows  = 100_000
	defaultMaxBytes = 64 << 20
	defaultMaxWait  = time.Second
)

// readerRun is one ReadStream activity run: the per-table buffers and the state it reports.
type readerRun struct {
	a       *Reader
	in      ReadStreamInput
	cfg     source.Config
	log     *slog.Logger
	held    *held
	fetcher *source.Fetcher
	tables  map[batch.TableName]*readerTable
	cuts    []batch.Cut
	result  ReadStreamResult
	lastLSN uint64 // the reader position of the last progress
	maxWait time.Duration
	// caughtUp is set at the first ProgressEvent.CaughtUp: the backlog the run started with has
	// been read.
	caughtUp bool
}

// tickEvery is how often the reader checks its buffers for batches whose MaxWait has passed: a
// tenth of it, between 10 ms and 1 s, so a batch is cut at most that late. (Every check was a
// second apart before, which held a batch up to a second past its MaxWait: a flush interval of
// 1 s cut batches 1-2 s after their first row.)
func tickEvery(maxWait time.Duration) time.Duration {
	return min(max(maxWait/10, 10*time.Millisecond), time.Second)
}

// readerTable is one table's buffer, collapser and record builder.
type readerTable struct {
	cfg     TableConfig
	buf     *batch.Buffer
	col     *batch.Collapser
	rec     *batch.RecordBuilder
	first   batch.Position
	pending bool
}

func (a *Reader) newRun(ctx context.Context, cfg source.Config, in ReadStreamInput) (*readerRun, error) {
	limits := batch.Limits{MaxRows: in.MaxRows, MaxBytes: int(in.MaxBytes), MaxWait: in.MaxWait}
	if limits.MaxRows <= 0 {
		limits.MaxRows = defaultMaxRows
	}
	if limits.MaxBytes <= 0 {
		limits.MaxBytes = defaultMaxBytes
	}
	if limits.MaxWait <= 0 {
		limits.MaxWait = defaultMaxWait
	}
	r := &readerRun{a: a, in: in, cfg: cfg, log: logOrDiscard(a.Logger).With("pipeline", in.Pipeline, "slot", cfg.Slot),
		held: newHeld(), tables: map[batch.TableName]*readerTable{}, maxWait: limits.MaxWait}
	r.result.Position = batch.SourcePosition{Source: in.Source}
	for _, t := range in.Tables {
		rt := &readerTable{cfg: t}
		var err error
		if rt.buf, err = batch.NewBuffer(t.Table(), limits); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeSourceSetup, err)
		}
		if err := rt.setSchema(t.Spec.Schema); err != nil {
			return nil, err
		}
		r.tables[t.Table()] = rt
	}
	var err error
	if r.fetcher, err = source.OpenFetcher(ctx, cfg); err != nil {
		r.close(ctx)
		return nil, sourceError("connecting to the source of pipeline "+in.Pipeline, err)
	}
	return r, nil
}

func (rt *readerTable) setSchema(s batch.Schema) error {
	col, err := batch.NewCollapser(s)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeSourceSetup, err)
	}
	rec, err := batch.NewRecordBuilder(memory.DefaultAllocator, s)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("table %s: %v", s.Table, err), ErrTypeSourceSetup, err)
	}
	if rt.rec != nil {
		rt.rec.Release()
	}
	rt.cfg.Spec.Schema, rt.col, rt.rec = s, col, rec
	return nil
}

func (r *readerRun) close(ctx context.Context) {
	for _, rt := range r.tables {
		if rt.rec != nil {
			rt.rec.Release()
		}
	}
	if r.fetcher != nil {
		_ = r.fetcher.Close(context.WithoutCancel(ctx))
	}
}

// run streams until RunFor passes (a clean end: the workflow continues as new) or a failure.
func (r *readerRun) run(ctx context.Context) (ReadStreamResult, error) {
	if err := r.held.refresh(ctx, r.a.Staging, r.in.Pipeline); err != nil {
		return r.result, fmt.Errorf("listing staged batches of pipeline %s: %w", r.in.Pipeline, err)
	}
	schemas := make([]batch.Schema, 0, len(r.in.Tables))
	for _, t := range r.in.Tables {
		schemas = append(schemas, t.Spec.Schema)
	}
	reader, err := source.NewReader(r.cfg, source.StreamOptions{Schemas: schemas, Safe: r.held.safe, Logger: r.log,
		ProgressInterval: tickEvery(r.maxWait), BeforeLastStatus: r.refreshHeld})
	if err != nil {
		return r.result, sourceError("starting the stream of pipeline "+r.in.Pipeline, err)
	}
	runFor := r.in.RunFor
	if runFor <= 0 {
		runFor = time.Hour
	}
	runCtx, stop := context.WithTimeout(ctx, runFor)
	defer stop()
	listEvery := r.a.ListEvery
	if listEvery <= 0 {
		listEvery = 5 * time.Second
	}
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return reader.Run(gctx, r.handle) })
	g.Go(func() error {
		t := time.NewTicker(listEvery)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
				if err := r.held.refresh(gctx, r.a.Staging, r.in.Pipeline); err != nil && gctx.Err() == nil {
					r.log.Warn("listing staged batches; the slot is confirmed from the last listing", "err", err)
				}
			}
		}
	})
	err = g.Wait()
	r.result.Confirmed = batch.SourcePosition{Source: r.in.Source, Position: batch.Position{LSN: reader.Confirmed()}}
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return r.result, nil // RunFor passed: buffered changes are re-read by the next run
	}
	if err == nil {
		return r.result, nil
	}
	if ctx.Err() != nil {
		return r.result, ctx.Err()
	}
	return r.result, sourceError("streaming pipeline "+r.in.Pipeline, err)
}

// refreshHeld lists the staged batches once more when the stream stops, so its last status
// update confirms what the tables committed since the previous listing (up to ListEvery ago): a
// clean stop and restart then does not read those transactions from the slot again.
func (r *readerRun) refreshHeld(ctx context.Context) {
	if err := r.held.refresh(ctx, r.a.Staging, r.in.Pipeline); err != nil {
		r.log.Warn("listing staged batches before the last status update; the slot is confirmed from the previous listing", "err", err)
	}
}

// handle receives the stream's events on the reader's goroutine.
func (r *readerRun) handle(ctx context.Context, ev source.Event) error {
	now := time.Now()
	switch e := ev.(type) {
	case *source.ChangeEvent:
		rt, ok := r.tables[e.Table]
		if !ok {
			return nil
		}
		before := rt.buf.Len()
		var err error
		r.cuts, err = rt.buf.Add(r.cuts[:0], e.Change, now)
		if err != nil {
			return err
		}
		switch {
		case rt.buf.Len() == 0:
			rt.pending = false
		case before == 0 || len(r.cuts) > 0:
			rt.first, rt.pending = e.Change.Pos, true
		}
		if err := r.stage(ctx, rt, r.cuts); err != nil {
			return err
		}
		r.held.setBuffered(e.Table, rt.first, rt.pending)
	case *source.CommitEvent:
		r.result.Position.Position = batch.Position{LSN: e.LSN}
	case *source.ProgressEvent:
		r.lastLSN = e.ReaderLSN
		activity.RecordHeartbeat(ctx, r.result)
		if e.CaughtUp && !r.caughtUp {
			r.caughtUp = true
			return r.flushCaughtUp(ctx)
		}
		return r.tick(ctx, now)
	case *source.SchemaEvent:
		return r.schemaChanged(ctx, e)
	case *source.TruncateEvent:
		return r.truncated(ctx, e)
	}
	return nil
}

// tick cuts the batches whose MaxWait passed.
func (r *readerRun) tick(ctx context.Context, now time.Time) error {
	for name, rt := range r.tables {
		if rt.buf.Len() == 0 {
			continue
		}
		r.cuts = rt.buf.Tick(r.cuts[:0], now)
		if len(r.cuts) == 0 {
			continue
		}
		if err := r.stage(ctx, rt, r.cuts); err != nil {
			return err
		}
		rt.pending = rt.buf.Len() > 0 // a Tick cuts everything buffered
		r.held.setBuffered(name, rt.first, rt.pending)
	}
	return nil
}

// flushCaughtUp stages every table's buffer once the backlog a run started with has been read
// (after a restart, a deploy or a pause): its tail reaches the sink now instead of one MaxWait
// later. Only the first time: afterwards a keepalive between transactions is the normal state of
// a quiet stream, whose batches MaxWait shapes.
func (r *readerRun) flushCaughtUp(ctx context.Context) error {
	for _, rt := range r.tables {
		if rt.buf.Len() == 0 {
			continue
		}
		if err := r.flush(ctx, rt); err != nil {
			return err
		}
	}
	return nil
}

// flush stages everything a table has buffered.
func (r *readerRun) flush(ctx context.Context, rt *readerTable) error {
	r.cuts = rt.buf.Flush(r.cuts[:0])
	if err := r.stage(ctx, rt, r.cuts); err != nil {
		return err
	}
	rt.pending = false
	r.held.setBuffered(rt.cfg.Table(), rt.first, false)
	return nil
}

// schemaChanged stages the table's buffered changes under the old schema, then follows the new
// one. Added columns reach the sink, whose EnsureTable evolves the target when the table's
// workflow commits the first batch that carries them. Columns added with a default resync the
// table (their values in existing rows are not in the WAL).
//
// A renamed table (or changes under a name the pipeline does not know) stops the reader: its
// changes would otherwise be skipped silently. The operator updates tables[].source and restarts.
func (r *readerRun) schemaChanged(ctx context.Context, e *source.SchemaEvent) error {
	rt, ok := r.tables[e.Table]
	if e.Renamed || !ok {
		old := "a table the pipeline does not know"
		if e.Old != nil {
			old = e.Old.Table.String()
		}
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"pipeline %s: %s now streams as %s (renamed or moved) at %s; the reader stops rather than skip its changes: "+
				"set tables[].source to %s in the config, restart the pipeline and resync the table",
			r.in.Pipeline, old, e.Table, e.Pos, e.Table), ErrTypeSourceSetup, nil)
	}
	if err := r.flush(ctx, rt); err != nil {
		return err
	}
	r.log.Warn("table schema changed", "table", e.Table.String(), "pos", e.Pos.String(),
		"added", e.Added, "dropped", e.Dropped, "retyped", e.Retyped)
	if err := rt.setSchema(e.New); err != nil {
		return err
	}
	// A column added with a default holds it in every existing row, but Postgres writes none of
	// those rows to the WAL: following the stream alone would leave NULL there in the sink for
	// every row not changed since. Only a new snapshot reads them, as after a TRUNCATE.
	defaulted, err := r.fetcher.ColumnsWithDefaults(ctx, e.Table, e.Added)
	if err != nil {
		return fmt.Errorf("table %s: checking the columns added at %s for defaults: %w", e.Table, e.Pos, err)
	}
	if len(defaulted) > 0 {
		r.log.Warn("columns added with a default: resyncing the table from a new snapshot, since their values in existing rows never stream",
			"table", e.Table.String(), "pos", e.Pos.String(), "columns", defaulted)
		if err := r.a.Tables.Resync(ctx, rt.cfg); err != nil {
			return fmt.Errorf("asking table %s to resync after columns %v were added with a default at %s: %w", e.Table, defaulted, e.Pos, err)
		}
	}
	return nil
}

// truncated stages what the table buffered before the TRUNCATE, then asks its workflow to resync.
func (r *readerRun) truncated(ctx context.Context, e *source.TruncateEvent) error {
	rt, ok := r.tables[e.Table]
	if !ok {
		return nil
	}
	if err := r.flush(ctx, rt); err != nil {
		return err
	}
	r.log.Warn("table truncated: resyncing it from a new snapshot", "table", e.Table.String(), "pos", e.Pos.String())
	if err := r.a.Tables.Resync(ctx, rt.cfg); err != nil {
		return fmt.Errorf("asking table %s to resync after its TRUNCATE at %s: %w", e.Table, e.Pos, err)
	}
	return nil
}

// stage collapses, completes and writes each cut, stages the file and signals the table.
//
// Until a cut is staged, the table is held at the cut's first change (lower than anything still
// buffered), so the slot is never confirmed past changes that are in neither place.
func (r *readerRun) stage(ctx context.Context, rt *readerTable, cuts []batch.Cut) error {
	if len(cuts) > 0 {
		r.held.setBuffered(rt.cfg.Table(), cuts[0].Lo, true)
	}
	for i := range cuts {
		c := &cuts[i]
		rows, err := rt.col.Collapse(c.Changes)
		if err != nil {
			return err
		}
		if rows, err = r.fetcher.Fill(ctx, rt.cfg.Spec.Schema, rows); err != nil {
			return fmt.Errorf("fetching unchanged TOAST values of table %s: %w", c.Table, err)
		}
		rec, err := rt.rec.Build(rows, time.Now())
		if err != nil {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("table %s: batch %s..%s cannot be converted: %v", c.Table, c.Lo, c.Hi, err), ErrTypePoisonBatch, err)
		}
		lo := batch.SourcePosition{Source: r.in.Source, Position: c.Lo}
		hi := batch.SourcePosition{Source: r.in.Source, Position: c.Hi}
		var buf bytes.Buffer
		compression := r.a.Compression
		if compression == "" {
			compression = batch.CompressionZstd
		}
		err = batch.WriteFile(&buf, rec, batch.FileHeader{Table: c.Table, Lo: lo, Hi: hi, Phase: c.Phase, Columns: rt.cfg.Spec.Schema.Columns}, compression)
		rec.Release()
		if err != nil {
			return err
		}
		ref := staging.BatchRef{Pipeline: r.in.Pipeline, Table: c.Table, Lo: lo, Hi: hi, Rows: int64(len(rows)),
			Bytes: int64(buf.Len()), Phase: sinks.Phase(c.Phase), FirstCommit: rows[0].CommitTS}
		staged, err := StageBatch(ctx, r.a.Staging, r.a.Tables, rt.cfg, ref, &buf)
		if err != nil {
			return fmt.Errorf("staging batch %s of table %s: %w", ref.Range(), c.Table, err)
		}
		r.held.addStaged(staged, time.Now())
		r.result.Batches++
		r.result.Rows += int64(len(rows))
	}
	return nil
}
