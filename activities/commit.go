package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/faults"
	"github.com/sluicecdc/sluice/metrics"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/staging"
)

// Commit holds the sink-side activities of a table: EnsureTable, LoadTable, CommitBatch and
// MaintainTable.
type Commit struct {
	Sinks   SinkProvider
	Staging *staging.Store
	// Mem allocates the decoded batches; nil means memory.DefaultAllocator.
	Mem memory.Allocator
	// HeartbeatEvery is how often a running commit heartbeats; 0 means 5 seconds. The workflow's
	// heartbeat timeout must be a few times longer.
	HeartbeatEvery time.Duration
	// Faults are the testing hooks of SLUICE_FAULTS (package internal/faults); nil in production.
	Faults *faults.Points
	// Metrics records commits, positions and maintenance runs; nil records nothing.
	Metrics *metrics.Metrics
	// Authority is the worker's config that every input is checked against; nil refuses all.
	Authority *Authority
}

// EnsureTable creates or evolves the table's target in its sink. It is idempotent. A target
// that holds a position of another source than in.Source is left as it is: a non-retryable
// SourceMismatch error.
func (a *Commit) EnsureTable(ctx context.Context, in TableConfig) error {
	if err := a.Authority.CheckTable(in); err != nil {
		return err
	}
	sink, err := a.Sinks.Sink(ctx, in.Sink)
	if err != nil {
		return fmt.Errorf("opening sink %s for table %s: %w", in.Sink.Name, in.Table(), err)
	}
	if _, _, err := storedPosition(ctx, sink, in); err != nil {
		return err
	}
	return sinkError(in, "creating or evolving target", sink.EnsureTable(ctx, in.Spec))
}

// CommitBatchInput names the batches to commit and their table: one (Ref), or several
// consecutive ones (Refs) that CommitBatch commits together in one sink commit.
type CommitBatchInput struct {
	Table TableConfig `json:"table"`
	// Ref is the one batch to commit when Refs is empty (the only form of histories recorded
	// before grouped commits).
	Ref staging.BatchRef `json:"ref,omitzero"`
	// Refs are staged batches of the table in commit order (staging.Compare), all of one phase:
	// a TableWorkflow catching up a backlog commits a window's consecutive batches at once. When
	// set, they are what is committed; the TableWorkflow also sets Ref to the first of them, so a
	// worker of an earlier version commits that one alone.
	Refs []staging.BatchRef `json:"refs,omitempty"`
}

// batches returns the refs to commit: Refs, or Ref alone.
func (in CommitBatchInput) batches() group {
	if len(in.Refs) > 0 {
		return in.Refs
	}
	return group{in.Ref}
}

// CommitBatchResult says what a commit did.
type CommitBatchResult struct {
	// Position is the table's committed position afterwards (the hi of the last batch that
	// wrote rows; the position read before when none did).
	Position batch.SourcePosition `json:"position"`
	Rows     int64                `json:"rows"`    // rows applied
	Dropped  int64                `json:"dropped"` // rows at or below the committed position, not re-applied
	Skipped  bool                 `json:"skipped"` // the sink already held every batch
	// Schema is set when the batches were read with other columns than the table's spec (ADD
	// COLUMN upstream): the target was evolved, and the workflow adopts it for later batches.
	Schema *batch.Schema `json:"schema,omitempty"`
	// Refs is how many of the input's batches were committed and acknowledged, from the first:
	// a group stops before a batch read with other columns than the batches before it, for the
	// next commit. Results recorded before grouped commits lack it: they committed their one.
	Refs int `json:"refs,omitempty"`
	// Collapsed counts rows not applied because a later row of the group has the same key.
	Collapsed int64 `json:"collapsed,omitempty"`
}

// CommitBatch commits staged batches (one, or several consecutive ones) to the table's sink in
// one atomic sink commit, idempotently by watermark. It reads the committed position from the
// sink once and lets batch.Covered decide for each batch in turn, against the position the
// batches before it in the group would have left, exactly as if they were committed one by
// one: a covered batch is skipped; a partly covered one has its rows at or below that position
// dropped (batch.DropCovered). The rows left are concatenated in position order and collapsed so
// each key appears once (batch.CollapseRecord: the last row wins, a delete is kept), then
// applied with lo of the first batch that kept rows and hi of the last one; then every staged
// file is acknowledged. A group stops before a batch read with other columns (ADD COLUMN
// upstream) than the batches before it: CommitBatchResult.Refs says how many it committed.
// Running it again after any crash is safe. A poison batch becomes a non-retryable PoisonBatch
// error naming the table, the range (first lo..last hi), the files and the cause; other
// failures are transient.
func (a *Commit) CommitBatch(ctx context.Context, in CommitBatchInput) (CommitBatchResult, error) {
	if err := a.Authority.CheckTable(in.Table); err != nil {
		return CommitBatchResult{}, err
	}
	g := in.batches()
	for _, ref := range g {
		if ref.Pipeline != in.Table.Pipeline || ref.Table != in.Table.Table() {
			return CommitBatchResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("batch %s was delivered to table %s of pipeline %s", ref, in.Table.Table(), in.Table.Pipeline),
				ErrTypeInvalidBatchRef, nil)
		}
		if ref.Phase != g[0].Phase {
			return CommitBatchResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("table %s: batches %s (%s) and %s (%s) of different phases were given to commit together",
					ref.Table, g[0].Range(), g[0].Phase, ref.Range(), ref.Phase), ErrTypeInvalidBatchRef, nil)
		}
	}
	stop := a.heartbeat(ctx, g.Range())
	defer stop()
	start := time.Now()

	sink, err := a.Sinks.Sink(ctx, in.Table.Sink)
	if err != nil {
		return CommitBatchResult{}, fmt.Errorf("opening sink %s for table %s: %w", in.Table.Sink.Name, in.Table.Table(), err)
	}
	for try := 1; ; try++ {
		res, err := a.commitGroup(ctx, sink, in.Table, g, start)
		if !errors.Is(err, errCommittedMeanwhile) {
			return res, err
		}
		// A concurrent attempt committed some of the batches and acknowledged their files:
		// start again from the position it left.
		if try == 3 {
			return CommitBatchResult{}, fmt.Errorf("committing batches %s of table %s: %w, three times", g.Range(), in.Table.Table(), err)
		}
	}
}

// commitGroup is one attempt of CommitBatch, from reading the sink's position; the activity
// started at start (for the commit duration metric).
func (a *Commit) commitGroup(ctx context.Context, sink sinks.Sink, table TableConfig, g group, start time.Time) (CommitBatchResult, error) {
	pos, ok, err := sink.Position(ctx, table.Spec)
	if err != nil {
		return CommitBatchResult{}, fmt.Errorf("reading committed position of table %s: %w", table.Table(), err)
	}
	var res CommitBatchResult
	r, err := a.read(ctx, sink, table, g, pos, ok)
	defer r.release()
	if err != nil {
		return res, err
	}
	res.Refs, res.Dropped = r.n, r.dropped
	done := g[:r.n]
	if len(r.parts) == 0 {
		// Every batch, or every row, is committed already: nothing to apply, the position stays.
		if err := a.acknowledge(ctx, done); err != nil {
			return CommitBatchResult{}, err
		}
		res.Position, res.Skipped = pos, !r.loaded
		a.Metrics.Commit(table.Pipeline, table.Table().String(), len(done), nil, time.Since(start), pos.Position.LSN)
		return res, nil
	}
	rec, err := batch.ConcatRecords(a.mem(), r.parts)
	if err != nil {
		return CommitBatchResult{}, poisonBatch(done, pos, ok, fmt.Errorf("joining the staged files: %w", err))
	}
	defer rec.Release()
	joined := len(r.parts) > 1
	r.release()
	if joined {
		collapsed, n, err := batch.CollapseRecord(a.mem(), rec, r.keys)
		if err != nil {
			return CommitBatchResult{}, poisonBatch(done, pos, ok, err)
		}
		defer collapsed.Release()
		rec, res.Collapsed = collapsed, n
	}
	spec, evolved, err := a.evolve(ctx, sink, table, done, r.header, pos, ok)
	if err != nil {
		return CommitBatchResult{}, err
	}
	first := done[0]
	if a.Faults.Fires(faults.CommitAckBeforeWrite, first) {
		// The deliberately broken commit path of the mutation test: acknowledge, crash, never write.
		_ = a.acknowledge(ctx, done)
		a.Faults.Crash(faults.CommitAckBeforeWrite, first)
	}
	a.Faults.Hit(faults.CommitBeforeWrite, first)
	if err := sink.Apply(ctx, sinks.Batch{Spec: spec, Phase: first.Phase, Record: rec, Lo: r.lo, Hi: r.at}); err != nil {
		return CommitBatchResult{}, batchError(done, pos, ok, "applying", err)
	}
	a.Faults.Hit(faults.CommitAfterWrite, first)
	if err := a.acknowledge(ctx, done); err != nil {
		// Retried: the next attempt finds the batches covered and only acknowledges them.
		return CommitBatchResult{}, err
	}
	a.Faults.Hit(faults.CommitAfterAck, first)
	activity.GetLogger(ctx).Info("committed batch", "table", first.Table.String(), "lo", r.lo.Position.String(),
		"hi", r.at.Position.String(), "batches", len(done), "rows", rec.NumRows(), "dropped", res.Dropped, "collapsed", res.Collapsed)
	res.Position, res.Rows = r.at, rec.NumRows()
	a.Metrics.Commit(table.Pipeline, table.Table().String(), len(done), batch.CountOps(rec), time.Since(start), r.at.Position.LSN)
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
func (a *Commit) read(ctx context.Context, sink sinks.Sink, table TableConfig, g group, pos batch.SourcePosition, ok bool) (*groupRead, error) {
	r := &groupRead{at: pos, atOK: ok}
	for i, ref := range g {
		cover, err := batch.Covered(r.at, r.atOK, ref.Phase, ref.Lo, ref.Hi)
		if err != nil {
			return r, sourceMismatch(table, fmt.Errorf("batch %s: %w", ref.Range(), err))
		}
		if cover == batch.CoverAll {
			r.n, r.dropped = i+1, r.dropped+ref.Rows
			continue
		}
		rec, h, dropped, err := a.load(ctx, sink, table, ref, r.at, r.atOK, cover)
		if err != nil {
			return r, err
		}
		cols := h.Columns
		if len(cols) == 0 {
			cols = table.Spec.Schema.Columns
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

// acknowledge removes the staged files of committed batches.
func (a *Commit) acknowledge(ctx context.Context, g group) error {
	for _, ref := range g {
		if err := a.Staging.Acknowledge(ctx, ref); err != nil {
			return err
		}
	}
	return nil
}

func (a *Commit) mem() memory.Allocator {
	if a.Mem == nil {
		return memory.DefaultAllocator
	}
	return a.Mem
}

// group is staged batches of one table committed together, in commit order.
type group []staging.BatchRef

// Range formats the group's range as the first batch's lo..the last one's hi.
func (g group) Range() string {
	return fmt.Sprintf("%s..%s", g[0].Lo.Position, g[len(g)-1].Hi.Position)
}

// Rows is the rows of the group's files.
func (g group) Rows() int64 {
	var n int64
	for _, r := range g {
		n += r.Rows
	}
	return n
}

// Files lists the staged files of the group.
func (g group) Files() string {
	uris := make([]string, len(g))
	for i, r := range g {
		uris[i] = r.URI
	}
	return strings.Join(uris, ", ")
}

// describe names the group the way errors do: "batch lo..hi (n rows, file)" for one batch,
// "n batches lo..hi (n rows, files ...)" for several.
func (g group) describe() string {
	if len(g) == 1 {
		return fmt.Sprintf("batch %s (%d rows, %s)", g.Range(), g.Rows(), g.Files())
	}
	return fmt.Sprintf("%d batches %s (%d rows, files %s)", len(g), g.Range(), g.Rows(), g.Files())
}

// evolve returns the spec to apply the batches with: the table's, or, when they were read with
// other columns (the source table changed), the table's with the batches' columns, after
// EnsureTable evolved the target for them. A change the sink cannot make is poison.
func (a *Commit) evolve(ctx context.Context, sink sinks.Sink, table TableConfig, g group, h batch.FileHeader, pos batch.SourcePosition, ok bool) (sinks.TableSpec, bool, error) {
	spec := table.Spec
	if len(h.Columns) == 0 || slices.Equal(h.Columns, spec.Schema.Columns) {
		return spec, false, nil
	}
	spec.Schema.Columns = h.Columns
	if err := sink.EnsureTable(ctx, spec); err != nil {
		return spec, false, batchError(g, pos, ok, "evolving the target for",
			fmt.Errorf("the source table's columns changed and target %s must follow them: %w", spec.Target, err))
	}
	activity.GetLogger(ctx).Info("evolved target for changed source columns", "table", table.Table().String(), "target", spec.Target)
	return spec, true, nil
}

// covers reads the sink's committed position and how much of ref it covers (batch.Covered, the
// watermark rule). Positions of different sources are a SourceMismatch.
func covers(ctx context.Context, sink sinks.Sink, table TableConfig, ref staging.BatchRef) (batch.Cover, error) {
	pos, ok, err := sink.Position(ctx, table.Spec)
	if err != nil {
		return batch.CoverNone, fmt.Errorf("reading committed position of table %s: %w", table.Table(), err)
	}
	cover, err := batch.Covered(pos, ok, ref.Phase, ref.Lo, ref.Hi)
	if err != nil {
		return cover, sourceMismatch(table, fmt.Errorf("batch %s: %w", ref.Range(), err))
	}
	return cover, nil
}

// errCommittedMeanwhile: a staged file is gone because a concurrent attempt committed it.
var errCommittedMeanwhile = errors.New("batch committed by a concurrent attempt")

// load reads ref's staged file and, when cover is CoverPart, drops the rows at or below pos. It
// returns errCommittedMeanwhile when the file is gone because a concurrent attempt committed it:
// only then is the sink's position read a second time.
func (a *Commit) load(ctx context.Context, sink sinks.Sink, table TableConfig, ref staging.BatchRef, pos batch.SourcePosition, ok bool, cover batch.Cover) (arrow.RecordBatch, batch.FileHeader, int64, error) {
	var h batch.FileHeader
	data, err := a.Staging.ReadAll(ctx, ref)
	if errors.Is(err, staging.ErrNotFound) {
		// An earlier attempt that outlived its heartbeat may have committed and acknowledged it.
		now, cerr := covers(ctx, sink, table, ref)
		if cerr != nil {
			return nil, h, 0, cerr
		}
		if now == batch.CoverAll {
			return nil, h, 0, errCommittedMeanwhile
		}
		return nil, h, 0, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("table %s: batch %s is not committed and no longer staged at %s (was the staging store cleaned?); its changes cannot be replayed, so resuming would skip them: run `sluice resync --table %s` to backfill the table from a new snapshot",
				ref.Table, ref.Range(), ref.URI, ref.Table), ErrTypeStagedBatchMissing, err)
	}
	if errors.Is(err, staging.ErrForeignURI) {
		return nil, h, 0, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeStagedBatchMissing, err)
	}
	if err != nil {
		return nil, h, 0, err
	}
	rec, h, err := staging.Decode(a.mem(), data, ref)
	if err != nil {
		return nil, h, 0, poisonBatch(group{ref}, pos, ok, fmt.Errorf("decoding staged file %s: %w", ref.URI, err))
	}
	if cover != batch.CoverPart {
		return rec, h, 0, nil
	}
	trimmed, dropped, err := batch.DropCovered(a.mem(), rec, pos.Position)
	rec.Release()
	if err != nil {
		return nil, h, 0, poisonBatch(group{ref}, pos, ok, fmt.Errorf("reading row positions of staged file %s: %w", ref.URI, err))
	}
	return trimmed, h, dropped, nil
}

// heartbeat records detail as a heartbeat now and every HeartbeatEvery until the returned stop
// is called, so a worker that dies mid-commit is noticed after the heartbeat timeout, not the
// whole start-to-close timeout.
func (a *Commit) heartbeat(ctx context.Context, detail string) (stop func()) {
	every := a.HeartbeatEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	activity.RecordHeartbeat(ctx, detail)
	return beatEvery(ctx, every, func() bool {
		activity.RecordHeartbeat(ctx, detail)
		return true
	})
}

// batchError turns the error of a sink call made while doing something to (or with) the
// batches of g into what CommitBatch returns: a poison error becomes the non-retryable
// PoisonBatch error (poisonBatch); any other is wrapped, for Temporal to retry.
func batchError(g group, pos batch.SourcePosition, ok bool, doing string, err error) error {
	if sinks.IsPoison(err) {
		return poisonBatch(g, pos, ok, err)
	}
	what := "batch " + g.Range()
	if len(g) > 1 {
		what = fmt.Sprintf("%d batches %s", len(g), g.Range())
	}
	return fmt.Errorf("%s %s of table %s: %w", doing, what, g[0].Table, err)
}

// sinkError turns the error of a sink call on table t's target into what an activity returns:
// nil stays nil; a poison error becomes the non-retryable PoisonBatch error that stops the table
// until the operator fixes the cause and resumes it; any other is wrapped, for Temporal to retry.
// doing says what the call did, as in "creating target": the message adds the target's name.
func sinkError(t TableConfig, doing string, err error) error {
	return sinkErrorAs(t, doing, ErrTypePoisonBatch, "the table stops; fix the cause (the target or the table config), then resume the table", err)
}

// sinkErrorAs is sinkError with the error type of poison and the advice its message ends with.
func sinkErrorAs(t TableConfig, doing, errType, advice string, err error) error {
	if err == nil {
		return nil
	}
	if sinks.IsPoison(err) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("table %s: sink %s failed %s %s: %v; %s", t.Table(), t.Sink.Name, doing, t.Spec.Target, err, advice),
			errType, err)
	}
	return fmt.Errorf("table %s: sink %s: %s %s: %w", t.Table(), t.Sink.Name, doing, t.Spec.Target, err)
}

// poisonBatch turns a poison cause into the non-retryable PoisonBatch error the table stops on,
// naming the table, the batches' range, rows and files.
func poisonBatch(g group, pos batch.SourcePosition, ok bool, cause error) error {
	at := "no committed position (backfill not finished)"
	if ok {
		at = "committed position " + pos.Position.String()
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("poison batch: table %s, %s: %v; the table stays at %s; fix the cause, then send resume",
			g[0].Table, g.describe(), cause, at),
		ErrTypePoisonBatch, cause)
}

// storedPosition reads the position the table's target holds. A position of another source
// than in.Source (when set) is a non-retryable SourceMismatch error, one older than the slot
// (in.SlotSince) a PositionGap.
func storedPosition(ctx context.Context, sink sinks.Sink, in TableConfig) (batch.SourcePosition, bool, error) {
	pos, ok, err := sink.Position(ctx, in.Spec)
	if err != nil {
		return pos, ok, fmt.Errorf("reading committed position of table %s: %w", in.Table(), err)
	}
	if ok && in.Source != nil && pos.Source != *in.Source {
		return pos, ok, sourceMismatch(in, fmt.Errorf("the target holds position %s, this pipeline reads source %s: %w",
			pos, *in.Source, batch.ErrDifferentSource))
	}
	return pos, ok, positionGap(in, pos, ok)
}

// sourceMismatch is the non-retryable error for positions of different sources: the target's
// stored position belongs to another source than the batches or the pipeline.
func sourceMismatch(in TableConfig, err error) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("table %s: the position stored in target %s belongs to another source (%v). "+
			"Another pipeline or database writes this target, or the source was replaced (another cluster, a failover to a new timeline, another slot). "+
			"Nothing was written to the target. Give this table its own target (tables[].target), or, if the target should follow this source from now on, "+
			"drop the target and run `sluice resume --table %s` to backfill it from this source",
			in.Table(), in.Spec.Target, err, in.Table()), ErrTypeSourceMismatch, err)
}
