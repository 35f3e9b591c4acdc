package activities

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
)

// The types of the non-retryable errors of a lost slot.
const (
	// ErrTypeSlotLost: the pipeline's replication slot was dropped or invalidated
	// (max_slot_wal_keep_size); the SourceWorkflow fails and is not retried. Every table may
	// have missed changes: tear down, start, and resync every table.
	ErrTypeSlotLost = "SlotLost"
	// ErrTypePositionGap: a table's committed position is older than the pipeline's slot (the
	// slot was created again after the table last committed), so the slot cannot deliver the
	// changes in between. The table stops before writing anything; resync it.
	ErrTypePositionGap = "PositionGap"
)

// slotLostError is the non-retryable SlotLost error of a lost slot, or nil when err is not one.
func slotLostError(what string, err error) error {
	lost, ok := errors.AsType[*source.SlotLostError](err)
	if !ok {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", what, lost), ErrTypeSlotLost, err)
}

// positionGap checks a table's committed position against the slot it continues from: a
// position older than the slot's creation (in.SlotSince; 0 means unknown and skips the check)
// came from an earlier slot, and the changes between it and this slot's start were never read.
func positionGap(in TableConfig, pos batch.SourcePosition, ok bool) error {
	if !ok || in.SlotSince == 0 || pos.Position.LSN >= in.SlotSince {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("table %s: its committed position %s (in target %s) is older than replication slot %s, which was created at %s: "+
			"the slot cannot deliver the changes between them (it was dropped and created again since the table last committed), "+
			"so continuing would skip them silently. Nothing was written. Remedy: `sluice resync --config <file> --table %s` "+
			"(discards the target and backfills it from a new snapshot)",
			in.Table(), pos.Position, in.Spec.Target, pos.Source.Slot, source.LSN(in.SlotSince), in.Table()),
		ErrTypePositionGap, nil)
}
