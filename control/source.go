package control

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/workflows"
)

// StartSource starts the pipeline's SourceWorkflow on taskQueue with in, by signal-with-start of
// SignalReconfigure: a running SourceWorkflow is not started again but reconfigured, so that its
// next run adds the tables the workers' config gained to the publication and starts them. tables
// are the pipeline's configured tables, which the Web UI's static summary and details list (the
// input carries none).
func StartSource(ctx context.Context, c client.Client, taskQueue string, in workflows.SourceInput, tables []activities.TableConfig) (client.WorkflowRun, error) {
	id := workflows.SourceWorkflowID(in.Pipeline)
	return c.SignalWithStartWorkflow(ctx, id, workflows.SignalReconfigure, nil, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            SourceSummary(in, tables),
		StaticDetails:            SourceDetails(in, tables),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.SearchPipeline.ValueSet(in.Pipeline), workflows.SearchPhase.ValueSet(string(workflows.StateStarting))),
	}, workflows.SourceWorkflowType, in)
}
