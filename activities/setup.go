package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/sluicecdc/sluice/batch"
)

// Setup holds the activities that prepare a pipeline: the slot and publication, and one running
// TableWorkflow per table.
type Setup struct {
	Tables TableStarter
}

// SetupInput describes a pipeline's source side.
type SetupInput struct {
	Pipeline    string        `json:"pipeline"`
	Slot        string        `json:"slot"`
	Publication string        `json:"publication"`
	Tables      []TableConfig `json:"tables"`
}

// SetupResult is the pipeline's source as the slot sees it.
type SetupResult struct {
	Source batch.SourceID `json:"source"`
	// Start is the slot's confirmed position: the reader resumes there.
	Start batch.SourcePosition `json:"start"`
	// Tables are the input's tables with Spec.Schema read from the source catalog.
	Tables []TableConfig `json:"tables"`
}

// SetupSource creates the slot and the publication when missing (idempotent), checks that the
// publication carries exactly the configured tables, and reads each table's schema.
//
// Not implemented yet: it needs package source's slot, publication and schema functions.
func (a *Setup) SetupSource(_ context.Context, _ SetupInput) (SetupResult, error) {
	return SetupResult{}, notImplemented("SetupSource", "source (slot, publication, schema)")
}

// EnsureTableWorkflows starts the TableWorkflow of every table that has none running, so idle
// tables are backfilled too. Tables whose workflow failed stay stopped for the operator. It is
// idempotent and heartbeats once per table.
func (a *Setup) EnsureTableWorkflows(ctx context.Context, tables []TableConfig) error {
	for i, t := range tables {
		if err := a.Tables.EnsureTable(ctx, t); err != nil {
			return fmt.Errorf("ensuring workflow of table %s: %w", t.Table(), err)
		}
		activity.RecordHeartbeat(ctx, i)
	}
	return nil
}
