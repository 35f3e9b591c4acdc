package activities

import (
	"fmt"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/source"
)

// TestPositionGap: a table whose committed position is older than the slot it continues from
// (recreated since) stops in EnsureTable and LoadTable with a PositionGap naming the table, the
// slot and the resync remedy; a position at or after the slot's start, no position, or an
// unknown start pass.
func TestPositionGap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		since    uint64
		stored   *batch.SourcePosition
		wantType string
	}{
		{name: "after the slot's start", since: 100, stored: ptr(sp(150, 1))},
		{name: "snapshot at the slot's start", since: 100, stored: ptr(sp(100, 0))},
		{name: "nothing stored: a backfill", since: 100},
		{name: "start unknown", stored: ptr(sp(50, 3))},
		{name: "older than the slot", since: 100, stored: ptr(sp(99, 7)), wantType: failure.PositionGap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, _ := storedPositionEnv(t, tt.stored)
			in := testTable
			in.Source = &testSource
			in.SlotSince = tt.since
			wantIn := []string{"shop.orders", testSource.Slot, fmt.Sprint(source.LSN(tt.since)), "sluice resync --config <file> --table shop.orders"}
			_, err := env.ExecuteActivity("EnsureTable", in)
			checkErr(t, err, tt.wantType, wantIn)
			_, err = env.ExecuteActivity("LoadTable", in)
			checkErr(t, err, tt.wantType, wantIn)
		})
	}
}

// TestSlotLostIsNotRetried: a lost slot from the source becomes a non-retryable SlotLost error,
// also when the reader wraps it.
func TestSlotLostIsNotRetried(t *testing.T) {
	t.Parallel()
	lost := failure.Permanent(&source.SlotLostError{Slot: "sluice_p", What: "was dropped"})
	for _, err := range []error{toTemporal(sourceError("setting up", lost)), toTemporal(readerError(fmt.Errorf("streaming pipeline p: %w", lost)))} {
		checkErr(t, err, failure.SlotLost, []string{"sluice_p", "was dropped", "sluice teardown"})
	}
}
