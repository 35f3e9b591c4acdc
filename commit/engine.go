package commit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/faults"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/metrics"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/staging"
)

// Logger is what the engine logs through: a *slog.Logger, or the Temporal activity logger.
type Logger interface {
	Info(msg string, keyvals ...any)
}

// Engine commits staged batches to sinks. Its fields are set once; an Engine is safe for
// concurrent use by commits of different tables (and by concurrent attempts of one commit,
// which the watermark rule keeps idempotent).
type Engine struct {
	Staging *staging.Store
	// Mem allocates the decoded batches; nil means memory.DefaultAllocator.
	Mem memory.Allocator
	// Faults are the testing hooks of SLUICE_FAULTS (package internal/faults); nil in production.
	Faults *faults.Points
	// Metrics records commits and positions; nil records nothing.
	Metrics *metrics.Metrics
}

// Commit commits staged batches refs of table t (one, or several consecutive ones of one phase,
// in commit order) to sink in one atomic sink commit, idempotently by watermark. It reads the
// committed position from the sink once and lets batch.Covered decide for each batch in turn,
// against the position the batches before it in the group would have left, exactly as if they
// were committed one by one: a covered batch is skipped; a partly covered one has its rows at or
// below that position dropped (batch.DropCovered). The rows left are concatenated in position
// order and collapsed so each key appears once (batch.CollapseRecord: the last row wins, a
// delete is kept), then applied with lo of the first batch that kept rows and hi of the last
// one; then every staged file is acknowledged. A group stops before a batch read with other
// columns (ADD COLUMN upstream) than the batches before it: Result.Refs says how many it
// committed. Running it again after any crash is safe.
//
// Failures retrying cannot fix are marked (package failure): InvalidBatchRef (refs of another
// table or of mixed phases), SourceMismatch (a position of another source), StagedBatchMissing
// (an uncommitted batch whose file is gone), PoisonBatch (a file that cannot be decoded, a sink
// that refuses the rows or the evolution; the message names the table, the range, the files and
// the cause). Other failures are transient. log may be nil.
func (e *Engine) Commit(ctx context.Context, sink sinks.Sink, t Table, refs []staging.BatchRef, log Logger) (Result, error) {
	g := group(refs)
	if len(g) == 0 {
		return Result{}, failure.Newf(failure.InvalidBatchRef, "table %s: no batch was given to commit", t.Table())
	}
	if err := checkGroup(t, g); err != nil {
		return Result{}, err
	}
	start := time.Now()
	for try := 1; ; try++ {
		res, err := e.commitGroup(ctx, sink, t, g, start, log)
		if !errors.Is(err, errCommittedMeanwhile) {
			return res, err
		}
		// A concurrent attempt committed some of the batches and acknowledged their files:
		// start again from the position it left.
		if try == 3 {
			return Result{}, fmt.Errorf("committing batches %s of table %s: %w, three times", g.Range(), t.Table(), err)
		}
	}
}

// commitGroup is one attempt of Commit, from reading the sink's position; the commit started at
// start (for the commit duration metric).
func (e *Engine) commitGroup(ctx context.Context, sink sinks.Sink, t Table, g group, start time.Time, log Logger) (Result, error) {
	pos, ok, err := sink.Position(ctx, t.Spec)
	if err != nil {
		return Result{}, fmt.Errorf("reading committed position of table %s: %w", t.Table(), err)
	}
	var res Result
	r, err := e.read(ctx, sink, t, g, pos, ok)
	defer r.release()
	if err != nil {
		return res, err
	}
	res.Refs, res.Dropped = r.n, r.dropped
	done := g[:r.n]
	if len(r.parts) == 0 {
		// Every batch, or every row, is committed already: nothing to apply, the position stays.
		if err := e.acknowledge(ctx, done); err != nil {
			return Result{}, err
		}
		res.Position, res.Skipped = pos, !r.loaded
		e.Metrics.Commit(t.Pipeline, t.Table().String(), len(done), nil, time.Since(start), pos.Position.LSN)
		return res, nil
	}
	rec, err := batch.ConcatRecords(e.mem(), r.parts)
	if err != nil {
		return Result{}, poisonBatch(done, pos, ok, fmt.Errorf("joining the staged files: %w", err))
	}
	defer rec.Release()
	joined := len(r.parts) > 1
	r.release()
	if joined {
		collapsed, n, err := batch.CollapseRecord(e.mem(), rec, r.keys)
		if err != nil {
			return Result{}, poisonBatch(done, pos, ok, err)
		}
		defer collapsed.Release()
		rec, res.Collapsed = collapsed, n
	}
	spec, evolved, err := e.evolve(ctx, sink, t, done, r.header, pos, ok, log)
	if err != nil {
		return Result{}, err
	}
	first := done[0]
	if e.Faults.Fires(faults.CommitAckBeforeWrite, first) {
		// The deliberately broken commit path of the mutation test: acknowledge, crash, never write.
		_ = e.acknowledge(ctx, done)
		e.Faults.Crash(faults.CommitAckBeforeWrite, first)
	}
	e.Faults.Hit(faults.CommitBeforeWrite, first)
	if err := sink.Apply(ctx, sinks.Batch{Spec: spec, Phase: first.Phase, Record: rec, Lo: r.lo, Hi: r.at}); err != nil {
		return Result{}, batchError(done, pos, ok, "applying", err)
	}
	e.Faults.Hit(faults.CommitAfterWrite, first)
	if err := e.acknowledge(ctx, done); err != nil {
		// Retried: the next attempt finds the batches covered and only acknowledges them.
		return Result{}, err
	}
	e.Faults.Hit(faults.CommitAfterAck, first)
	if log != nil {
		log.Info("committed batch", logkey.Table, first.Table.String(), logkey.Lo, r.lo.Position.String(),
			logkey.Hi, r.at.Position.String(), logkey.Batches, len(done), logkey.Rows, rec.NumRows(), logkey.Dropped, res.Dropped, logkey.Collapsed, res.Collapsed)
	}
	res.Position, res.Rows = r.at, rec.NumRows()
	e.Metrics.Commit(t.Pipeline, t.Table().String(), len(done), batch.CountOps(rec), time.Since(start), r.at.Position.LSN)
	if evolved {
		res.Schema = &spec.Schema
	}
	return res, nil
}

// groupRead is what read found in a group's staged files.
type groupRead struct {
	n       int                  // batches of the group this commit takes, from the first
	dropped int64                // rows covered by the position
	loaded  bool                 // some batch was not covered whole, so its file was read
	header  batch.FileHeader     // the file header of the first file read
	columns []batch.Column       // the columns the files were read with (the spec's when not said)
	keys    []int                // indexes of the key columns among them
	parts   []arrow.RecordBatch  // the rows to apply, one record per batch that kept rows
	lo      batch.SourcePosition // lo of the first batch that kept rows
	at      batch.SourcePosition // hi of the last batch that kept rows: the position to commit
	atOK    bool
}

func (r *groupRead) release() {
	for _, p := range r.parts {
		p.Release()
	}
	r.parts = nil
}

// read applies the watermark rule to each batch of g in turn, against the position the
// batches before it would have left (pos for the first), reads the files of the batches not
// covered whole and trims the partly covered ones. It stops before a batch read with other
// columns than the first file read, and after the first file read when the table has no key
// (rows without a key cannot be collapsed).
func (e *Engine) read(ctx context.Context, sink sinks.Sink, t Table, g group, pos batch.SourcePosition, ok bool) (*groupRead, error) {
	r := &groupRead{at: pos, atOK: ok}
	for i, ref := range g {
		cover, err := batch.Covered(r.at, r.atOK, ref.Phase, ref.Lo, ref.Hi)
		if err != nil {
			return r, SourceMismatch(t, fmt.Errorf("batch %s: %w", ref.Range(), err))
		}
		if cover == batch.CoverAll {
			r.n, r.dropped = i+1, r.dropped+ref.Rows
			continue
		}
		rec, h, dropped, err := e.load(ctx, sink, t, ref, r.at, r.atOK, cover)
		if err != nil {
			return r, err
		}
		cols := h.Columns
		if len(cols) == 0 {
			cols = t.Spec.Schema.Columns
		}
		if r.loaded && !slices.Equal(cols, r.columns) {
			// The source table changed between these batches: the next commit evolves the
			// target for the later ones.
			rec.Release()
			break
		}
		if !r.loaded {
			r.loaded, r.header, r.columns = true, h, cols
			r.keys = batch.Schema{Columns: cols}.KeyIndexes()
		}
		r.n, r.dropped = i+1, r.dropped+dropped
		if rec.NumRows() == 0 {
			rec.Release()
		} else {
			if len(r.parts) == 0 {
				r.lo = ref.Lo
			}
			r.parts = append(r.parts, rec)
			r.at, r.atOK = ref.Hi, true
		}
		if len(r.keys) == 0 {
			break
		}
	}
	return r, nil
}

// load reads ref's staged file and, when cover is CoverPart, drops the rows at or below pos. It
// returns errCommittedMeanwhile when the file is gone because a concurrent attempt committed it:
// only then is the sink's position read a second time.
func (e *Engine) load(ctx context.Context, sink sinks.Sink, t Table, ref staging.BatchRef, pos batch.SourcePosition, ok bool, cover batch.Cover) (arrow.RecordBatch, batch.FileHeader, int64, error) {
	var h batch.FileHeader
	data, err := e.Staging.ReadAll(ctx, ref)
	if errors.Is(err, staging.ErrNotFound) {
		// An earlier attempt that outlived its heartbeat may have committed and acknowledged it.
		now, cerr := covers(ctx, sink, t, ref)
		if cerr != nil {
			return nil, h, 0, cerr
		}
		if now == batch.CoverAll {
			return nil, h, 0, errCommittedMeanwhile
		}
		return nil, h, 0, stagedMissing(ref, err)
	}
	if errors.Is(err, staging.ErrForeignURI) {
		return nil, h, 0, failure.New(failure.StagedBatchMissing, err.Error(), err)
	}
	if err != nil {
		return nil, h, 0, err
	}
	rec, h, err := staging.Decode(e.mem(), data, ref)
	if err != nil {
		return nil, h, 0, poisonBatch(group{ref}, pos, ok, fmt.Errorf("decoding staged file %s: %w", ref.URI, err))
	}
	if cover != batch.CoverPart {
		return rec, h, 0, nil
	}
	trimmed, dropped, err := batch.DropCovered(e.mem(), rec, pos.Position)
	rec.Release()
	if err != nil {
		return nil, h, 0, poisonBatch(group{ref}, pos, ok, fmt.Errorf("reading row positions of staged file %s: %w", ref.URI, err))
	}
	return trimmed, h, dropped, nil
}

// evolve returns the spec to apply the batches with: the table's, or, when they were read with
// other columns (the source table changed), the table's with the batches' columns, after
// EnsureTable evolved the target for them. A change the sink cannot make is poison.
func (e *Engine) evolve(ctx context.Context, sink sinks.Sink, t Table, g group, h batch.FileHeader, pos batch.SourcePosition, ok bool, log Logger) (sinks.TableSpec, bool, error) {
	spec := t.Spec
	if len(h.Columns) == 0 || slices.Equal(h.Columns, spec.Schema.Columns) {
		return spec, false, nil
	}
	spec.Schema.Columns = h.Columns
	if err := sink.EnsureTable(ctx, spec); err != nil {
		return spec, false, batchError(g, pos, ok, "evolving the target for",
			fmt.Errorf("the source table's columns changed and target %s must follow them: %w", spec.Target, err))
	}
	if log != nil {
		log.Info("evolved target for changed source columns", logkey.Table, t.Table().String(), logkey.Target, spec.Target)
	}
	return spec, true, nil
}

// acknowledge removes the staged files of committed batches.
func (e *Engine) acknowledge(ctx context.Context, g group) error {
	for _, ref := range g {
		if err := e.Staging.Acknowledge(ctx, ref); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) mem() memory.Allocator {
	if e.Mem == nil {
		return memory.DefaultAllocator
	}
	return e.Mem
}
