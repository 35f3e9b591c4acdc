package workflows

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/staging"
)

// Tables starts and signals TableWorkflows through a Temporal client. It implements
// activities.TableStarter for the setup and reader activities, and gives the starter its
// resume, pause and resync commands. It is safe for concurrent use.
type Tables struct {
	Client    client.Client
	TaskQueue string       // empty: TaskQueue
	Options   TableOptions // passed to new runs
}

func (t Tables) startOptions(table activities.TableConfig, reuse enumspb.WorkflowIdReusePolicy) client.StartWorkflowOptions {
	q := t.TaskQueue
	if q == "" {
		q = TaskQueue
	}
	return client.StartWorkflowOptions{
		ID:                       TableWorkflowID(table.Pipeline, table.Table()),
		TaskQueue:                q,
		WorkflowIDReusePolicy:    reuse,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A run that fails retryably (a lost snapshot session) is retried as a new run; a
		// non-retryable failure (PoisonBatch) is not.
		RetryPolicy: RetryForever(),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SearchPipeline.ValueSet(table.Pipeline),
			SearchTable.ValueSet(table.Table().String()),
			SearchPhase.ValueSet(PhaseStarting),
		),
	}
}

// stoppedTable reports whether err says that the table's workflow is closed and may not be
// started again automatically (its last run failed or was terminated).
func stoppedTable(err error) bool {
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &started)
}

// EnsureTable starts the table's workflow when none runs. A table whose workflow closed (a
// poison batch, a termination) stays stopped: resuming it is the operator's decision.
func (t Tables) EnsureTable(ctx context.Context, table activities.TableConfig) error {
	opts := t.startOptions(table, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE)
	_, err := t.Client.ExecuteWorkflow(ctx, opts, TableWorkflowType, TableInput{TableConfig: table, Options: t.Options})
	if err != nil && !stoppedTable(err) {
		return fmt.Errorf("starting workflow %s: %w", opts.ID, err)
	}
	return nil
}

// SignalBatch delivers ref to the table's workflow with signal-with-start. A stopped table is
// not restarted: ref stays staged and the run the operator resumes loads it from staging.
func (t Tables) SignalBatch(ctx context.Context, table activities.TableConfig, ref staging.BatchRef) error {
	opts := t.startOptions(table, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE)
	_, err := t.Client.SignalWithStartWorkflow(ctx, opts.ID, SignalBatch, ref, opts, TableWorkflowType,
		TableInput{TableConfig: table, Options: t.Options})
	if err != nil && !stoppedTable(err) {
		return fmt.Errorf("signalling batch %s to workflow %s: %w", ref.Range(), opts.ID, err)
	}
	return nil
}

// Resume sends resume to the table's workflow with signal-with-start: a paused run resumes; a
// failed or terminated table gets a new run that reads its position from the sink and its queue
// from staging (after a poison batch, fix the cause first).
func (t Tables) Resume(ctx context.Context, table activities.TableConfig) error {
	opts := t.startOptions(table, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE)
	_, err := t.Client.SignalWithStartWorkflow(ctx, opts.ID, SignalResume, nil, opts, TableWorkflowType,
		TableInput{TableConfig: table, Options: t.Options})
	if err != nil {
		return fmt.Errorf("resuming workflow %s: %w", opts.ID, err)
	}
	return nil
}

// Pause asks the table's running workflow to stop committing after the current batch.
func (t Tables) Pause(ctx context.Context, table activities.TableConfig) error {
	return t.signal(ctx, table, SignalPause)
}

// Resync asks the table's running workflow to discard its target and backfill it again.
func (t Tables) Resync(ctx context.Context, table activities.TableConfig) error {
	return t.signal(ctx, table, SignalResync)
}

func (t Tables) signal(ctx context.Context, table activities.TableConfig, name string) error {
	id := TableWorkflowID(table.Pipeline, table.Table())
	if err := t.Client.SignalWorkflow(ctx, id, "", name, nil); err != nil {
		return fmt.Errorf("sending %s to workflow %s: %w", name, id, err)
	}
	return nil
}

var _ activities.TableStarter = Tables{}
