package control

import (
	"fmt"
	"strings"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/workflows"
)

// What the Temporal Web UI shows of a workflow before any run has written current details: the
// static summary and details the client sets when it starts the workflow
// (StartWorkflowOptions.StaticSummary, StaticDetails). The current details a run keeps up to date
// are the workflow's own (workflows/webui.go).

// TableSummary is a TableWorkflow's one-line static summary: "pipeline p: public.orders →
// raw.orders (iceberg)".
func TableSummary(t activities.TableConfig) string {
	return fmt.Sprintf("pipeline %s: %s → %s (%s)", t.Pipeline, t.Table(), t.Spec.Target, t.Sink.Name)
}

// TableDetails is a TableWorkflow's static details (Markdown): what it replicates and the
// commands that act on it.
func TableDetails(t activities.TableConfig) string {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("Sluice replicates table **%s** of pipeline **%s** into **%s** (sink %s).\n\n",
		t.Table(), t.Pipeline, t.Spec.Target, t.Sink.Name))
	if len(t.Key) > 0 {
		b.WriteString(fmt.Sprintf("Key: %s (configured).\n\n", strings.Join(t.Key, ", ")))
	}
	b.WriteString(fmt.Sprintf("- status: `sluice status --config <pipeline.yaml>`\n"))
	b.WriteString(fmt.Sprintf("- pause, resume, resync: `sluice pause|resume|resync --config <pipeline.yaml> --table %s`\n", t.Table()))
	b.WriteString("- runbooks: docs/operations.md\n")
	return b.String()
}

// SourceSummary is a SourceWorkflow's one-line static summary; tables are the pipeline's
// configured tables (the input lists none).
func SourceSummary(in workflows.SourceInput, tables []activities.TableConfig) string {
	sink := ""
	if len(tables) > 0 {
		sink = " → " + tables[0].Sink.Name
	}
	return fmt.Sprintf("pipeline %s: slot %s, publication %s, %d table(s)%s", in.Pipeline, in.Slot, in.Publication, len(tables), sink)
}

// sourceDetailsTables is the most tables SourceDetails lists: the details travel in the
// workflow's start event, which must stay small whatever the number of tables.
const sourceDetailsTables = 50

// SourceDetails is a SourceWorkflow's static details (Markdown): its slot, publication and
// tables (the first sourceDetailsTables of them).
func SourceDetails(in workflows.SourceInput, tables []activities.TableConfig) string {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("Sluice pipeline **%s** reads replication slot **%s** (publication **%s**) and feeds one TableWorkflow per table:\n\n",
		in.Pipeline, in.Slot, in.Publication))
	for i, t := range tables {
		if i == sourceDetailsTables {
			b.WriteString(fmt.Sprintf("- ... and %d more (`sluice status`)\n", len(tables)-i))
			break
		}
		b.WriteString(fmt.Sprintf("- %s → %s (%s): workflow `%s`\n", t.Table(), t.Spec.Target, t.Sink.Name, workflows.TableWorkflowID(in.Pipeline, t.Table())))
	}
	b.WriteString("\nStatus: `sluice status --config <pipeline.yaml>`; runbooks: docs/operations.md\n")
	return b.String()
}
