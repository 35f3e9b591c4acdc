package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/faults"
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
}

// EnsureTable creates or evolves the table's target in its sink. It is idempotent. A target
// that holds a position of another source than in.Source is left as it is: a non-retryable
// SourceMismatch error.
func (a *Commit) EnsureTable(ctx context.Context, in TableConfig) error {
	sink, err := a.Sinks.Sink(ctx, in.Sink)
	if err != nil {
		return fmt.Errorf("opening sink %s for table %s: %w", in.Sink.Name, in.Table(), err)
	}
	if _, _, err := storedPosition(ctx, sink, in); err != nil {
		return err
	}
	return sinkError(in, "creating or evolving target", sink.EnsureTable(ctx, in.Spec))
}

// CommitBatchInput names the batch to commit and its table.
type CommitBatchInput struct {
	Table TableConfig      `json:"table"`
	Ref   staging.BatchRef `json:"ref"`
}

// CommitBatchResult says what a commit did.
type CommitBatchResult struct {
	// Position is the table's committed position afterwards (the batch's hi unless the batch was
	// covered already or all its rows were).
	Position batch.SourcePosition `json:"position"`
	Rows     int64                `json:"rows"`    // rows applied
	Dropped  int64                `json:"dropped"` // rows at or below the committed position, not re-applied
	Skipped  bool                 `json:"skipped"` // the sink already held the whole batch
	// Schema is set when the batch was read with other columns than the table's spec (ADD
	// COLUMN upstream): the target was evolved, and the workflow adopts it for later batches.
	Schema *batch.Schema `json:"schema,omitempty"`
}

// CommitBatch commits one staged batch to the table's sink, idempotently by watermark: it reads
// the committed position from the sink once and lets batch.Covered decide: a batch the position
// covers is acknowledged and skipped; a partly covered one has its rows at or below the position
// dropped (batch.DropCovered); the rest is applied together with hi in one atomic sink commit;
// then the staged file is acknowledged.
// Running it again after any crash is safe. A poison batch becomes a non-retryable PoisonBatch
// error naming the table, the batch's range and the cause; other failures are transient.
func (a *Commit) CommitBatch(ctx context.Context, in CommitBatchInput) (CommitBatchResult, error) {
	ref := in.Ref
	if ref.Pipeline != in.Table.Pipeline || ref.Table != in.Table.Table() {
		return CommitBatchResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("batch %s was delivered to table %s of pipeline %s", ref, in.Table.Table(), in.Table.Pipeline),
			ErrTypeInvalidBatchRef, nil)
	}
	stop := a.heartbeat(ctx, ref.Range())
	defer stop()

	sink, err := a.Sinks.Sink(ctx, in.Table.Sink)
	if err != nil {
		return CommitBatchResult{}, fmt.Errorf("opening sink %s for table %s: %w", in.Table.Sink.Name, ref.Table, err)
	}
	pos, ok, cover, err := committed(ctx, sink, in)
	if err != nil {
		return CommitBatchResult{}, err
	}
	if cover == batch.CoverAll {
		if err := a.Staging.Acknowledge(ctx, ref); err != nil {
			return CommitBatchResult{}, err
		}
		return CommitBatchResult{Position: pos, Skipped: true, Dropped: ref.Rows}, nil
	}

	rec, header, dropped, err := a.load(ctx, sink, in, pos, ok, cover)
	if errors.Is(err, errCommittedMeanwhile) {
		return CommitBatchResult{Position: ref.Hi, Skipped: true, Dropped: ref.Rows}, nil
	}
	if err != nil {
		return CommitBatchResult{}, err
	}
	defer rec.Release()

	if rec.NumRows() == 0 {
		// Every row is committed already: nothing to apply, the position stays.
		if err := a.Staging.Acknowledge(ctx, ref); err != nil {
			return CommitBatchResult{}, err
		}
		return CommitBatchResult{Position: pos, Dropped: dropped}, nil
	}
	spec, evolved, err := a.evolve(ctx, sink, in, header, pos, ok)
	if err != nil {
		return CommitBatchResult{}, err
	}
	if a.Faults.Fires(faults.CommitAckBeforeWrite, ref) {
		// The deliberately broken commit path of the mutation test: acknowledge, crash, never write.
		_ = a.Staging.Acknowledge(ctx, ref)
		a.Faults.Crash(faults.CommitAckBeforeWrite, ref)
	}
	a.Faults.Hit(faults.CommitBeforeWrite, ref)
	if err := sink.Apply(ctx, sinks.Batch{Spec: spec, Phase: ref.Phase, Record: rec, Lo: ref.Lo, Hi: ref.Hi}); err != nil {
		return CommitBatchResult{}, batchError(ref, pos, ok, "applying", err)
	}
	a.Faults.Hit(faults.CommitAfterWrite, ref)
	if err := a.Staging.Acknowledge(ctx, ref); err != nil {
		// Retried: the next attempt finds the batch covered and only acknowledges it.
		return CommitBatchResult{}, err
	}
	a.Faults.Hit(faults.CommitAfterAck, ref)
	activity.GetLogger(ctx).Info("committed batch", "table", ref.Table.String(), "lo", ref.Lo.Position.String(),
		"hi", ref.Hi.Position.String(), "rows", rec.NumRows(), "dropped", dropped)
	res := CommitBatchResult{Position: ref.Hi, Rows: rec.NumRows(), Dropped: dropped}
	if evolved {
		res.Schema = &spec.Schema
	}
	return res, nil
}

// evolve returns the spec to apply the batch with: the table's, or, when the batch was read with
// other columns (the source table changed), the table's with the batch's columns, after
// EnsureTable evolved the target for them. A change the sink cannot make is poison.
func (a *Commit) evolve(ctx context.Context, sink sinks.Sink, in CommitBatchInput, h batch.FileHeader, pos batch.SourcePosition, ok bool) (sinks.TableSpec, bool, error) {
	spec := in.Table.Spec
	if len(h.Columns) == 0 || slices.Equal(h.Columns, spec.Schema.Columns) {
		return spec, false, nil
	}
	spec.Schema.Columns = h.Columns
	if err := sink.EnsureTable(ctx, spec); err != nil {
		return spec, false, batchError(in.Ref, pos, ok, "evolving the target for",
			fmt.Errorf("the source table's columns changed and target %s must follow them: %w", spec.Target, err))
	}
	activity.GetLogger(ctx).Info("evolved target for changed source columns", "table", in.Ref.Table.String(), "target", spec.Target)
	return spec, true, nil
}

// committed reads the sink's committed position and how much of the batch it covers
// (batch.Covered, the watermark rule). Positions of different sources are a SourceMismatch.
func committed(ctx context.Context, sink sinks.Sink, in CommitBatchInput) (batch.SourcePosition, bool, batch.Cover, error) {
	pos, ok, err := sink.Position(ctx, in.Table.Spec)
	if err != nil {
		return pos, ok, batch.CoverNone, fmt.Errorf("reading committed position of table %s: %w", in.Ref.Table, err)
	}
	cover, err := batch.Covered(pos, ok, in.Ref.Phase, in.Ref.Lo, in.Ref.Hi)
	if err != nil {
		return pos, ok, cover, sourceMismatch(in.Table, fmt.Errorf("batch %s: %w", in.Ref.Range(), err))
	}
	return pos, ok, cover, nil
}

// errCommittedMeanwhile: the staged file is gone because a concurrent attempt committed it.
var errCommittedMeanwhile = errors.New("batch committed by a concurrent attempt")

// load reads the staged file and, when cover is CoverPart, drops the rows the sink holds
// already. It returns errCommittedMeanwhile when the file is gone because a concurrent attempt
// committed it: only then is the position read a second time.
func (a *Commit) load(ctx context.Context, sink sinks.Sink, in CommitBatchInput, pos batch.SourcePosition, ok bool, cover batch.Cover) (arrow.RecordBatch, batch.FileHeader, int64, error) {
	var h batch.FileHeader
	ref := in.Ref
	data, err := a.Staging.ReadAll(ctx, ref)
	if errors.Is(err, staging.ErrNotFound) {
		// An earlier attempt that outlived its heartbeat may have committed and acknowledged it.
		_, _, now, cerr := committed(ctx, sink, in)
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
	mem := a.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	rec, h, err := staging.Decode(mem, data, ref)
	if err != nil {
		return nil, h, 0, poisonBatch(ref, pos, ok, fmt.Errorf("decoding staged file %s: %w", ref.URI, err))
	}
	if cover != batch.CoverPart {
		return rec, h, 0, nil
	}
	trimmed, dropped, err := batch.DropCovered(mem, rec, pos.Position)
	rec.Release()
	if err != nil {
		return nil, h, 0, poisonBatch(ref, pos, ok, fmt.Errorf("reading row positions of staged file %s: %w", ref.URI, err))
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

// batchError turns the error of a sink call made while doing something to (or with) batch ref
// into what CommitBatch returns: a poison error becomes the non-retryable PoisonBatch error
// (poisonBatch); any other is wrapped, for Temporal to retry.
func batchError(ref staging.BatchRef, pos batch.SourcePosition, ok bool, doing string, err error) error {
	if sinks.IsPoison(err) {
		return poisonBatch(ref, pos, ok, err)
	}
	return fmt.Errorf("%s batch %s of table %s: %w", doing, ref.Range(), ref.Table, err)
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

// poisonBatch turns a poison cause into the non-retryable PoisonBatch error the table stops on.
func poisonBatch(ref staging.BatchRef, pos batch.SourcePosition, ok bool, cause error) error {
	at := "no committed position (backfill not finished)"
	if ok {
		at = "committed position " + pos.Position.String()
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("poison batch: table %s, batch %s (%d rows, %s): %v; the table stays at %s; fix the cause, then send resume",
			ref.Table, ref.Range(), ref.Rows, ref.URI, cause, at),
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
