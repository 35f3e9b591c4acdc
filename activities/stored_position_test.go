package activities

import (
	"context"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/staging"
)

// storedPositionEnv is an activity environment whose Commit activities write to one fake sink
// that holds stored as its position (none when nil) and counts EnsureTable calls.
func storedPositionEnv(t *testing.T, stored *batch.SourcePosition) (*testsuite.TestActivityEnvironment, *fakeSink) {
	t.Helper()
	st, err := staging.OpenDir(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	if stored != nil {
		sink.pos, sink.hasPos = *stored, true
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&Commit{Authority: testAuthority, Sinks: oneSink{sink}, Staging: st})
	return env, sink
}

// TestStoredPositionOfAnotherSource: a table that knows its pipeline's source refuses a target
// holding another source's position in EnsureTable (before touching the target) and LoadTable,
// with a SourceMismatch error that names table, target and what to do.
func TestStoredPositionOfAnotherSource(t *testing.T) {
	t.Parallel()
	other := batch.SourceID{SystemID: "7399999999999999999", Timeline: 1, Slot: "sluice_other"}
	tests := []struct {
		name     string
		source   *batch.SourceID // the table's configured source
		stored   *batch.SourcePosition
		wantType string
	}{
		{name: "same source", source: &testSource, stored: ptr(sp(100, 2))},
		{name: "nothing stored", source: &testSource},
		{name: "source not known (started by hand): the first commit decides", stored: ptr(batch.SourcePosition{Source: other})},
		{name: "another cluster", source: &testSource, stored: ptr(batch.SourcePosition{Source: other, Position: batch.Position{LSN: 100}}),
			wantType: failure.SourceMismatch},
		{name: "another slot", source: &testSource, stored: ptr(batch.SourcePosition{
			Source: batch.SourceID{SystemID: testSource.SystemID, Timeline: 1, Slot: "sluice_p2"}, Position: batch.Position{LSN: 100}}),
			wantType: failure.SourceMismatch},
		{name: "another timeline", source: &testSource, stored: ptr(batch.SourcePosition{
			Source: batch.SourceID{SystemID: testSource.SystemID, Timeline: 2, Slot: testSource.Slot}, Position: batch.Position{LSN: 100}}),
			wantType: failure.SourceMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, sink := storedPositionEnv(t, tt.stored)
			in := testTable
			in.Source = tt.source
			wantIn := []string{"shop.orders", "raw.orders", "another source", "sluice resume --table shop.orders"}

			_, err := env.ExecuteActivity("EnsureTable", in)
			checkErr(t, err, tt.wantType, wantIn)
			if ensured := sink.ensured == 1; ensured != (tt.wantType == "") {
				t.Errorf("the sink's EnsureTable ran: %v, want %v", ensured, tt.wantType == "")
			}
			_, err = env.ExecuteActivity("LoadTable", in)
			checkErr(t, err, tt.wantType, wantIn)
		})
	}
}
