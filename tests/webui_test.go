package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/workflows"
)

// TestWebUIExplainsEachWorkflow reads what the Temporal Web UI shows of a running pipeline
// without querying Sluice's status: each workflow's static summary and details (set when it
// starts), its current details (the UI's __temporal_workflow_metadata query: phase, committed
// position, rows, last error) and a summary on each activity it scheduled ("commit lo..hi, N
// rows", "read slot ...").
func TestWebUIExplainsEachWorkflow(t *testing.T) {
	defer parallel(t)()
	p := newPipelineWith(t, pipelineOptions{Tables: []string{"public.a:raw.a", "public.b:raw.b"}, SetupSQL: twoTablesDDL(300)})
	p.worker("worker")
	p.sluice("start")
	p.waitStream(tableA)
	p.exec(`INSERT INTO public.a SELECT g, 'a-' || g, 1 FROM generate_series(1001, 1100) g`)
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)
	tableID := workflows.TableWorkflowID(p.name, tableA)
	wantSummary := fmt.Sprintf("pipeline %s: public.a → raw.a (iceberg)", p.name)
	if got := staticSummary(t, p.temporal, tableID); got != wantSummary {
		t.Errorf("workflow %s: static summary %q, want %q", tableID, got, wantSummary)
	}
	details := waitCurrentDetails(t, p.temporal, tableID, func(d string) bool {
		return strings.HasPrefix(d, "**stream**") && strings.Contains(d, "committed ") && strings.Contains(d, "rows in")
	})
	if strings.Contains(details, "last error") {
		t.Errorf("workflow %s: current details show an error on a healthy table:\n%s", tableID, details)
	}
	commits := activitySummaries(t, p.temporal, tableID, "CommitBatch")
	if len(commits) == 0 || !strings.HasPrefix(commits[len(commits)-1], "commit ") || !strings.Contains(commits[len(commits)-1], " rows") {
		t.Errorf("workflow %s: CommitBatch summaries %q, want \"commit lo..hi, N rows\"", tableID, commits)
	}

	sourceID := workflows.SourceWorkflowID(p.name)
	if got := staticSummary(t, p.temporal, sourceID); !strings.HasPrefix(got, "pipeline "+p.name+": slot "+p.cfg.Source.Slot) {
		t.Errorf("workflow %s: static summary %q, want the pipeline, its slot and tables", sourceID, got)
	}
	waitCurrentDetails(t, p.temporal, sourceID, func(d string) bool { return strings.HasPrefix(d, "**running**") })
	reads := activitySummaries(t, p.temporal, sourceID, "ReadStream")
	if len(reads) == 0 || !strings.HasPrefix(reads[0], "read slot "+p.cfg.Source.Slot) {
		t.Errorf("workflow %s: ReadStream summaries %q, want \"read slot %s for ...\"", sourceID, reads, p.cfg.Source.Slot)
	}

	// A failing table's details name the error.
	p.exec(`ALTER TABLE public.b ALTER COLUMN qty TYPE text USING qty::text`,
		`INSERT INTO public.b VALUES (5000, 'poisoned', 'not-an-int')`)
	p.waitTableFailed(tableB)
	waitCurrentDetails(t, p.temporal, workflows.TableWorkflowID(p.name, tableB), func(d string) bool {
		return strings.HasPrefix(d, "**failed**") && strings.Contains(d, "last error: ")
	})
}

// decodeString decodes a user-metadata payload (a JSON string), "" when absent.
func decodeString(t *testing.T, p *commonpb.Payload) string {
	t.Helper()
	if p == nil {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		t.Fatalf("decoding a user metadata payload: %v", err)
	}
	return s
}

// staticSummary is the summary the Web UI shows at the top of a workflow's page.
func staticSummary(t *testing.T, c client.Client, id string) string {
	t.Helper()
	desc, err := c.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return decodeString(t, desc.GetExecutionConfig().GetUserMetadata().GetSummary())
}

// waitCurrentDetails queries the workflow's metadata as the Web UI does until its current
// details satisfy ok, and returns them.
func waitCurrentDetails(t *testing.T, c client.Client, id string, ok func(string) bool) string {
	t.Helper()
	var details string
	err := localrun.WaitFor(context.Background(), "the current details of "+id, time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			v, err := c.QueryWorkflow(ctx, id, "", "__temporal_workflow_metadata")
			if err != nil {
				return false, err.Error(), nil
			}
			var md sdkpb.WorkflowMetadata
			if err := v.Get(&md); err != nil {
				return false, "", err
			}
			details = md.GetCurrentDetails()
			return ok(details), fmt.Sprintf("current details %q", details), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return details
}

// activitySummaries are the summaries of the activities of type activityType the workflow's
// current run scheduled, in order.
func activitySummaries(t *testing.T, c client.Client, id, activityType string) []string {
	t.Helper()
	var out []string
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activityType {
			out = append(out, decodeString(t, e.GetUserMetadata().GetSummary()))
		}
	}
	return out
}

// TestSetupTemporalRegistersSearchAttributes runs the starter against a fresh namespace, as on a
// user's own cluster: `sluice check` names the missing search attributes and the command to run,
// `sluice start` cannot start; `sluice setup-temporal` registers them (a second run changes
// nothing), after which check passes and the pipeline starts.
func TestSetupTemporalRegistersSearchAttributes(t *testing.T) {
	defer parallel(t)()
	p := newPipelineWith(t, pipelineOptions{Tables: []string{"public.a:raw.a"}, SetupSQL: twoTablesDDL(10)})
	ctx := context.Background()
	ns := "sa-" + p.name
	if _, err := p.temporal.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		t.Fatalf("registering namespace %s: %v", ns, err)
	}
	env := append(slices.Clone(p.env), "SLUICE_TEMPORAL_NAMESPACE="+ns)
	starter := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return localrun.Sluice(ctx, bins.Starter, env, append(args, "--config", p.config)...)
	}

	// A new namespace is served once the frontend's namespace cache has it.
	var out string
	err := localrun.WaitFor(ctx, "sluice check to see namespace "+ns, time.Minute, 500*time.Millisecond, func(context.Context) (bool, string, error) {
		var err error
		out, err = starter("check")
		return err != nil && strings.Contains(out, "lacks Sluice's search attributes"), out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Temporal namespace " + ns, "SluicePipeline, SluiceTable, SluicePhase", "sluice setup-temporal --config " + p.config,
		"temporal operator search-attribute create --namespace " + ns + " --name SluicePhase --type Keyword"} {
		if !strings.Contains(out, want) {
			t.Errorf("sluice check on a namespace without the search attributes does not say %q:\n%s", want, out)
		}
	}
	if out, err := starter("start"); err == nil {
		t.Errorf("sluice start succeeded in a namespace without the search attributes:\n%s", out)
	}

	if out, err = starter("setup-temporal"); err != nil || !strings.Contains(out, "registered search attributes SluicePipeline, SluiceTable, SluicePhase in Temporal namespace "+ns) {
		t.Fatalf("sluice setup-temporal: %v\n%s", err, out)
	}
	if out, err = starter("setup-temporal"); err != nil || !strings.Contains(out, "already has Sluice's search attributes") {
		t.Fatalf("sluice setup-temporal again: %v\n%s", err, out)
	}
	if out, err = starter("check"); err != nil || strings.Contains(out, "search attributes") {
		t.Errorf("sluice check after setup-temporal: %v\n%s", err, out)
	}
	if out, err = starter("start"); err != nil {
		t.Fatalf("sluice start after setup-temporal: %v\n%s", err, out)
	}
	if out, err = starter("stop"); err != nil {
		t.Errorf("sluice stop: %v\n%s", err, out)
	}
}
