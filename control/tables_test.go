package control

import (
	"context"
	"errors"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/staging"
	"github.com/sluicecdc/sluice/workflows"
)

// fakeClient is the part of client.Client that Tables uses; a nil field fails the test's call
// (through the embedded nil interface). It records the calls that start or signal a workflow.
type fakeClient struct {
	client.Client
	status  enumspb.WorkflowExecutionStatus // the latest run's; UNSPECIFIED: never started
	failure error                           // the latest run's result
	signal  func(signal string) error       // SignalWorkflow; nil: succeeds
	calls   []string
}

func (f *fakeClient) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if f.status == enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
		return nil, serviceerror.NewNotFound("workflow " + id)
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: f.status}}, nil
}

func (f *fakeClient) GetWorkflow(context.Context, string, string) client.WorkflowRun {
	return fakeRun{err: f.failure}
}

func (f *fakeClient) SignalWorkflow(_ context.Context, _, _, signal string, _ any) error {
	f.calls = append(f.calls, "signal "+signal)
	if f.signal != nil {
		return f.signal(signal)
	}
	return nil
}

func (f *fakeClient) SignalWithStartWorkflow(_ context.Context, _, signal string, _ any, _ client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	f.calls = append(f.calls, "signal-with-start "+signal)
	return fakeRun{}, nil
}

func (f *fakeClient) ExecuteWorkflow(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	f.calls = append(f.calls, "start")
	return fakeRun{}, nil
}

type fakeRun struct {
	client.WorkflowRun
	err error
}

func (r fakeRun) Get(context.Context, any) error { return r.err }

func notRunning(string) error { return serviceerror.NewNotFound("no running workflow") }

func failedWith(errType string) *fakeClient {
	return &fakeClient{status: enumspb.WORKFLOW_EXECUTION_STATUS_FAILED,
		failure: temporal.NewNonRetryableApplicationError("stopped", errType, nil), signal: notRunning}
}

func TestTables(t *testing.T) {
	t.Parallel()
	table := activities.TableConfig{Pipeline: "p", Spec: sinks.TableSpec{Target: "raw.orders",
		Schema: batch.Schema{Table: batch.TableName{Schema: "public", Name: "orders"}}}}
	refs := []staging.BatchRef{{Pipeline: "p", Rows: 1}}
	tests := []struct {
		name    string
		client  *fakeClient
		do      func(Tables) error
		calls   string
		wantErr string
	}{
		{"ensure starts a table never started", &fakeClient{},
			func(ts Tables) error { return ts.EnsureTableWorkflow(context.Background(), table) }, "start", ""},
		{"ensure leaves a failed table stopped", failedWith(failure.PoisonBatch),
			func(ts Tables) error { return ts.EnsureTableWorkflow(context.Background(), table) }, "", ""},
		{"batches signal a running table", &fakeClient{status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
			func(ts Tables) error { return ts.SignalBatches(context.Background(), table, refs) }, "signal batches", ""},
		{"batches start a completed table", &fakeClient{status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, signal: notRunning},
			func(ts Tables) error { return ts.SignalBatches(context.Background(), table, refs) },
			"signal batches, signal-with-start batches", ""},
		{"batches leave a failed table stopped", failedWith(failure.PoisonBatch),
			func(ts Tables) error { return ts.SignalBatches(context.Background(), table, refs) }, "signal batches", ""},
		{"no batches send nothing", &fakeClient{},
			func(ts Tables) error { return ts.SignalBatches(context.Background(), table, nil) }, "", ""},
		{"a signal error is returned", &fakeClient{status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
			signal: func(string) error { return errors.New("unavailable") }},
			func(ts Tables) error { return ts.SignalBatches(context.Background(), table, refs) }, "signal batches", "unavailable"},
		{"resume restarts a poisoned table", failedWith(failure.PoisonBatch),
			func(ts Tables) error { return ts.Resume(context.Background(), table) }, "signal-with-start resume", ""},
		{"resume refuses a table only a resync repairs", failedWith(failure.SchemaChanged),
			func(ts Tables) error { return ts.Resume(context.Background(), table) }, "", "sluice resync --table public.orders"},
		{"resync restarts any table", failedWith(failure.SchemaChanged),
			func(ts Tables) error { return ts.Resync(context.Background(), table) }, "signal-with-start resync", ""},
		{"pause signals the run", &fakeClient{status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
			func(ts Tables) error { return ts.Pause(context.Background(), table) }, "signal pause", ""},
		{"stop leaves a table that does not run", &fakeClient{signal: notRunning},
			func(ts Tables) error {
				return ts.Stop(context.Background(), table, failure.PartitionChanged, "m", "e")
			}, "signal stop", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.do(Tables{Client: tt.client})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			if got := strings.Join(tt.client.calls, ", "); got != tt.calls {
				t.Errorf("calls %q, want %q", got, tt.calls)
			}
		})
	}
}

func TestResyncOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		errType string
		want    bool
	}{
		{failure.StagedBatchMissing, true},
		{failure.SchemaChanged, true},
		{failure.PartitionChanged, true},
		{failure.TableRewritten, true},
		{failure.PoisonBatch, false},
		{unknownFailure, false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.errType, func(t *testing.T) {
			t.Parallel()
			if why, ok := resyncOnly(tt.errType); ok != tt.want || ok == (why == "") {
				t.Errorf("resyncOnly(%q) = %q, %v; want ok %v with a reason when ok", tt.errType, why, ok, tt.want)
			}
		})
	}
}

func TestSummaries(t *testing.T) {
	t.Parallel()
	table := activities.TableConfig{Pipeline: "p", Spec: sinks.TableSpec{Target: "raw.orders",
		Schema: batch.Schema{Table: batch.TableName{Schema: "public", Name: "orders"}}}, Sink: activities.SinkRef{Name: "iceberg"}}
	in := workflows.SourceInput{Pipeline: "p", Slot: "s", Publication: "pub"}
	tests := []struct{ name, got, want string }{
		{"table summary", TableSummary(table), "pipeline p: public.orders → raw.orders (iceberg)"},
		{"source summary", SourceSummary(in, []activities.TableConfig{table}), "pipeline p: slot s, publication pub, 1 table(s) → iceberg"},
		{"source details name the table's workflow", SourceDetails(in, []activities.TableConfig{table}), "workflow `sluice/p/public.orders`"},
		{"search attribute commands", SearchAttributeCommands("ns"), "--namespace ns --name SluicePhase --type Keyword"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(tt.got, tt.want) {
				t.Errorf("%q does not contain %q", tt.got, tt.want)
			}
		})
	}
}
