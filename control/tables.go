package control

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/staging"
	"github.com/sluicecdc/sluice/workflows"
)

// Tables starts and signals TableWorkflows through a Temporal client. It implements
// activities.TableStarter for the setup and reader activities, and gives the starter its
// resume, pause and resync commands. It is safe for concurrent use.
type Tables struct {
	Client    client.Client
	TaskQueue string                 // empty: workflows.TaskQueue
	Options   workflows.TableOptions // passed to new runs
}

func (t Tables) startOptions(table activities.TableConfig, reuse enumspb.WorkflowIdReusePolicy) client.StartWorkflowOptions {
	q := t.TaskQueue
	if q == "" {
		q = workflows.TaskQueue
	}
	return client.StartWorkflowOptions{
		ID:                       workflows.TableWorkflowID(table.Pipeline, table.Table()),
		TaskQueue:                q,
		WorkflowIDReusePolicy:    reuse,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A run that fails retryably (a lost snapshot session) is retried as a new run; a
		// non-retryable failure (PoisonBatch) is not.
		RetryPolicy:   workflows.RetryForever(),
		StaticSummary: TableSummary(table),
		StaticDetails: TableDetails(table),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.SearchPipeline.ValueSet(table.Pipeline),
			workflows.SearchTable.ValueSet(table.Table().String()),
			workflows.SearchPhase.ValueSet(string(workflows.StateStarting)),
		),
	}
}

// failedTable reports whether the table's latest run failed (a poison batch, a non-retryable
// error): such a table stays stopped until the operator resumes it. A table that was never
// started, or whose run was terminated or cancelled (sluice stop) or completed, may be started.
func (t Tables) failedTable(ctx context.Context, id string) (bool, error) {
	desc, err := t.Client.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("describing workflow %s: %w", id, err)
	}
	st := desc.GetWorkflowExecutionInfo().GetStatus()
	return st == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED || st == enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, nil
}

// EnsureTableWorkflow starts the table's workflow when none runs. A table whose last run failed
// (a poison batch) stays stopped: resuming it is the operator's decision.
func (t Tables) EnsureTableWorkflow(ctx context.Context, table activities.TableConfig) error {
	opts := t.startOptions(table, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE)
	if failed, err := t.failedTable(ctx, opts.ID); err != nil || failed {
		return err
	}
	_, err := t.Client.ExecuteWorkflow(ctx, opts, workflows.TableWorkflowType, workflows.TableInput{TableConfig: table, Options: t.Options})
	if err != nil {
		return fmt.Errorf("starting workflow %s: %w", opts.ID, err)
	}
	return nil
}

// SignalBatches delivers refs (staged in this order) to the table's workflow in one signal: a
// signal when it runs, signal-with-start when it does not. A table whose last run failed is
// not restarted: the refs stay staged and the run the operator resumes loads them from staging.
func (t Tables) SignalBatches(ctx context.Context, table activities.TableConfig, refs []staging.BatchRef) error {
	if len(refs) == 0 {
		return nil
	}
	what := staging.DescribeRefs(refs)
	opts := t.startOptions(table, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE)
	err := t.Client.SignalWorkflow(ctx, opts.ID, "", workflows.SignalBatches, refs)
	var notFound *serviceerror.NotFound
	if err == nil || !errors.As(err, &notFound) {
		if err != nil {
			return fmt.Errorf("signalling %s to workflow %s: %w", what, opts.ID, err)
		}
		return nil
	}
	if failed, err := t.failedTable(ctx, opts.ID); err != nil || failed {
		return err
	}
	if err := t.signalWithStart(ctx, opts, table, workflows.SignalBatches, refs); err != nil {
		return fmt.Errorf("signalling %s to workflow %s: %w", what, opts.ID, err)
	}
	return nil
}

// resyncOnly says whether a table stopped with errType can only be made equal to the source again
// by a resync, and why.
func resyncOnly(errType string) (why string, ok bool) {
	switch errType {
	case failure.StagedBatchMissing:
		return "a batch it had not committed is no longer staged, so resuming would skip that batch's changes", true
	case failure.SchemaChanged:
		return "a rename or a retype rewrote the existing rows without writing them to the WAL", true
	case failure.PartitionChanged:
		return "a partition attached holding rows, or detached, dropped or truncated, changed rows the stream never carried", true
	case failure.TableRecreated:
		return "the table was dropped and re-created: the new table's rows never streamed", true
	case failure.PublicationChanged:
		return "the publication did not carry some of the table's changes for a while, and those changes never streamed", true
	case failure.TableRewritten:
		return "a rewrite of the table (ALTER COLUMN ... TYPE) changed every row's value without writing them to the WAL", true
	}
	return "", false
}

// Resume sends resume to the table's workflow with signal-with-start: a paused run resumes; a
// failed or terminated table gets a new run that reads its position from the sink and its queue
// from staging (after a poison batch, fix the cause first).
//
// A table whose last run stopped for a reason in resyncOnly is refused: a new run would go on
// from its position past changes the stream never carried, silently. Such a table needs Resync.
func (t Tables) Resume(ctx context.Context, table activities.TableConfig) error {
	opts := t.startOptions(table, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE)
	errType, err := t.lastFailure(ctx, opts.ID)
	if err != nil {
		return err
	}
	if why, ok := resyncOnly(errType); ok {
		return fmt.Errorf("table %s: not resumed: its last run stopped with %s (%s), and resuming would leave the sink "+
			"diverged from the source; run `sluice resync --table %s` to backfill the table from a new snapshot",
			table.Table(), errType, why, table.Table())
	}
	if err := t.signalWithStart(ctx, opts, table, workflows.SignalResume, nil); err != nil {
		return fmt.Errorf("resuming workflow %s: %w", opts.ID, err)
	}
	return nil
}

// Pause asks the table's running workflow to stop committing after the current batch.
func (t Tables) Pause(ctx context.Context, table activities.TableConfig) error {
	return t.signal(ctx, table, workflows.SignalPause)
}

// Resync asks the table's workflow to discard its target and backfill it again, with
// signal-with-start: a running table resyncs in its run; a failed or stopped one gets a new run
// that resyncs first (table must carry its schema for that run, as for Resume).
func (t Tables) Resync(ctx context.Context, table activities.TableConfig) error {
	opts := t.startOptions(table, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE)
	if err := t.signalWithStart(ctx, opts, table, workflows.SignalResync, nil); err != nil {
		return fmt.Errorf("resyncing workflow %s: %w", opts.ID, err)
	}
	return nil
}

// Stop fails the table's running workflow with a non-retryable error of type errType and
// message msg (workflows.SignalStop; see workflows.StopRequest for epoch); a table that does not
// run (failed, stopped) is left as it is.
func (t Tables) Stop(ctx context.Context, table activities.TableConfig, errType, msg, epoch string) error {
	id := workflows.TableWorkflowID(table.Pipeline, table.Table())
	err := t.Client.SignalWorkflow(ctx, id, "", workflows.SignalStop, workflows.StopRequest{Type: errType, Message: msg, Epoch: epoch})
	if _, notFound := errors.AsType[*serviceerror.NotFound](err); err != nil && !notFound {
		return fmt.Errorf("stopping workflow %s: %w", id, err)
	}
	return nil
}

// signalWithStart delivers signal (with arg) to the table's workflow, starting a new run of it
// with the table's input when none runs.
func (t Tables) signalWithStart(ctx context.Context, opts client.StartWorkflowOptions, table activities.TableConfig, signal string, arg any) error {
	_, err := t.Client.SignalWithStartWorkflow(ctx, opts.ID, signal, arg, opts, workflows.TableWorkflowType,
		workflows.TableInput{TableConfig: table, Options: t.Options})
	return err
}

// lastFailure returns the error type of the table's latest run when that run failed, and ""
// when it runs, was never started, or ended otherwise.
func (t Tables) lastFailure(ctx context.Context, id string) (string, error) {
	failed, err := t.failedTable(ctx, id)
	if err != nil || !failed {
		return "", err
	}
	runErr := t.Client.GetWorkflow(ctx, id, "").Get(ctx, nil)
	var appErr *temporal.ApplicationError
	if errors.As(runErr, &appErr) && appErr.Type() != "" {
		return appErr.Type(), nil
	}
	return unknownFailure, nil
}

// unknownFailure is lastFailure's type for a failure that is no typed application error.
const unknownFailure = "Unknown"

func (t Tables) signal(ctx context.Context, table activities.TableConfig, name string) error {
	id := workflows.TableWorkflowID(table.Pipeline, table.Table())
	if err := t.Client.SignalWorkflow(ctx, id, "", name, nil); err != nil {
		return fmt.Errorf("sending %s to workflow %s: %w", name, id, err)
	}
	return nil
}

var _ activities.TableStarter = Tables{}

// FailedTables counts the pipeline's tables whose latest run failed (waiting for the operator),
// by the failure's error type ("" when it is not an application error). It finds them through
// the SluicePipeline search attribute: failed runs listed, then each table's latest run checked,
// so a table resumed since counts no more.
func (t Tables) FailedTables(ctx context.Context, pipeline string) (map[string]int, error) {
	query := fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Failed' AND WorkflowType = '%s'",
		workflows.SearchPipeline.GetName(), strings.ReplaceAll(pipeline, "'", "''"), workflows.TableWorkflowType)
	seen := map[string]bool{}
	failed := map[string]int{}
	var token []byte
	for {
		resp, err := t.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("listing failed tables of pipeline %s: %w", pipeline, err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if seen[id] {
				continue
			}
			seen[id] = true
			typ, err := t.lastFailure(ctx, id)
			if err != nil {
				return nil, err
			}
			if typ != "" { // "": resumed since
				failed[typ]++
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return failed, nil
		}
	}
}
