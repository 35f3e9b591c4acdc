package commit

import (
	"errors"
	"fmt"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// errCommittedMeanwhile: a staged file is gone because a concurrent attempt committed it.
var errCommittedMeanwhile = errors.New("batch committed by a concurrent attempt")

// checkGroup refuses batches of another pipeline or table than t, or of mixed phases: a bug in
// the caller (InvalidBatchRef).
func checkGroup(t Table, g group) error {
	for _, ref := range g {
		if ref.Pipeline != t.Pipeline || ref.Table != t.Table() {
			return failure.Newf(failure.InvalidBatchRef, "batch %s was delivered to table %s of pipeline %s", ref, t.Table(), t.Pipeline)
		}
		if ref.Phase != g[0].Phase {
			return failure.Newf(failure.InvalidBatchRef, "table %s: batches %s (%s) and %s (%s) of different phases were given to commit together",
				ref.Table, g[0].Range(), g[0].Phase, ref.Range(), ref.Phase)
		}
	}
	return nil
}

// batchError turns the error of a sink call made while doing something to (or with) the
// batches of g into what Commit returns: a poison error becomes the PoisonBatch failure
// (poisonBatch); any other is wrapped, transient.
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

// poisonBatch turns a poison cause into the PoisonBatch failure the table stops on, naming the
// table, the batches' range, rows and files.
func poisonBatch(g group, pos batch.SourcePosition, ok bool, cause error) error {
	at := "no committed position (backfill not finished)"
	if ok {
		at = "committed position " + pos.Position.String()
	}
	return failure.New(failure.PoisonBatch,
		fmt.Sprintf("poison batch: table %s, %s: %v; the table stays at %s; fix the cause, then send resume",
			g[0].Table, g.describe(), cause, at), cause)
}

// stagedMissing is the StagedBatchMissing failure of a batch the sink does not hold whose
// staged file is gone: its changes cannot be replayed.
func stagedMissing(ref staging.BatchRef, err error) error {
	return failure.New(failure.StagedBatchMissing,
		fmt.Sprintf("table %s: batch %s is not committed and no longer staged at %s (was the staging store cleaned?); its changes cannot be replayed, so resuming would skip them: run `sluice resync --table %s` to backfill the table from a new snapshot",
			ref.Table, ref.Range(), ref.URI, ref.Table), err)
}

// SinkError turns the error of a sink call on table t's target into what an activity returns:
// nil stays nil; a poison error becomes the PoisonBatch failure that stops the table until the
// operator fixes the cause and resumes it; any other is wrapped, transient. doing says what the
// call did, as in "creating target": the message adds the target's name.
func SinkError(t Table, doing string, err error) error {
	return SinkErrorAs(t, doing, failure.PoisonBatch, "the table stops; fix the cause (the target or the table config), then resume the table", err)
}

// SinkErrorAs is SinkError with the failure type of poison and the advice its message ends with.
func SinkErrorAs(t Table, doing, typ, advice string, err error) error {
	if err == nil {
		return nil
	}
	if sinks.IsPoison(err) {
		return failure.New(typ,
			fmt.Sprintf("table %s: sink %s failed %s %s: %v; %s", t.Table(), t.Sink.Name, doing, t.Spec.Target, err, advice), err)
	}
	return fmt.Errorf("table %s: sink %s: %s %s: %w", t.Table(), t.Sink.Name, doing, t.Spec.Target, err)
}

// SourceMismatch is the failure of positions of different sources: the target's stored
// position belongs to another source than the batches or the pipeline.
func SourceMismatch(t Table, err error) error {
	return failure.New(failure.SourceMismatch,
		fmt.Sprintf("table %s: the position stored in target %s belongs to another source (%v). "+
			"Another pipeline or database writes this target, or the source was replaced (another cluster, a failover to a new timeline, another slot). "+
			"Nothing was written to the target. Give this table its own target (tables[].target), or, if the target should follow this source from now on, "+
			"drop the target and run `sluice resume --table %s` to backfill it from this source",
			t.Table(), t.Spec.Target, err, t.Table()), err)
}

// positionGap checks a table's committed position against the slot it continues from: a
// position older than the slot's creation (t.SlotSince; 0 means unknown and skips the check)
// came from an earlier slot, and the changes between it and this slot's start were never read.
func positionGap(t Table, pos batch.SourcePosition, ok bool) error {
	if !ok || t.SlotSince == 0 || pos.Position.LSN >= t.SlotSince {
		return nil
	}
	return failure.Newf(failure.PositionGap,
		"table %s: its committed position %s (in target %s) is older than replication slot %s, which was created at %s: "+
			"the slot cannot deliver the changes between them (it was dropped and created again since the table last committed), "+
			"so continuing would skip them silently. Nothing was written. Remedy: `sluice resync --config <file> --table %s` "+
			"(discards the target and backfills it from a new snapshot)",
		t.Table(), pos.Position, t.Spec.Target, pos.Source.Slot, source.LSN(t.SlotSince), t.Table())
}
