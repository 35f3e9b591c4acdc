package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
)

// TestReplayRecordedHistories replays workflow histories recorded from real runs (testdata/,
// exported with `temporal workflow show -o json` from `make demo`: a backfill of 10,000 rows,
// then live inserts, updates, deletes and a key change) against today's workflow code. A change
// that would make running workflows non-deterministic after an upgrade of the workers fails here.
// When a change is deliberately incompatible, version it with workflow.GetVersion and record new
// histories next to the old ones; never just replace them.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*_workflow_*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			Register(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replaying %s: %v", f, err)
			}
		})
	}
}
