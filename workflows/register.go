package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers SourceWorkflow and TableWorkflow under their type names.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(SourceWorkflow, workflow.RegisterOptions{Name: SourceWorkflowType})
	r.RegisterWorkflowWithOptions(TableWorkflow, workflow.RegisterOptions{Name: TableWorkflowType})
}
