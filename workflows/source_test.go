package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/failure"
)

func TestSourceWorkflowSetsUpReadsAndContinuesAsNew(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	Register(env)
	activities.Set{Setup: &activities.Setup{}, Reader: &activities.Reader{Authority: &activities.Authority{Pipeline: "p1"}}}.Register(env)
	var calls []string
	env.OnActivity(setupActs.SetupSource, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SetupInput) (activities.SetupResult, error) {
			calls = append(calls, "SetupSource")
			return activities.SetupResult{Source: testSource, Start: sp(10), Tables: in.Tables}, nil
		})
	env.OnActivity(setupActs.EnsureTableWorkflows, mock.Anything, mock.Anything).Return(
		func(_ context.Context, tables []activities.TableConfig) error {
			calls = append(calls, "EnsureTableWorkflows")
			if len(tables) != 1 || tables[0].Spec.Target != "raw.orders" {
				return errors.New("tables not passed on from setup")
			}
			return nil
		})
	env.OnActivity(readerActs.ReadStream, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(_ context.Context, in activities.ReadStreamInput) (activities.ReadStreamResult, error) {
			calls = append(calls, "ReadStream")
			if in.Source != testSource || in.RunFor != time.Hour {
				return activities.ReadStreamResult{}, errors.New("reader input lacks the source or run time")
			}
			return activities.ReadStreamResult{Position: sp(500), Confirmed: sp(400), Batches: 3, Rows: 30}, nil
		})
	var running SourceStatus
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		if err == nil {
			err = v.Get(&running)
		}
		if err != nil {
			t.Errorf("status query: %v", err)
		}
	}, 30*time.Second)

	env.ExecuteWorkflow(SourceWorkflowType, SourceInput{Pipeline: "p1", Slot: "sluice_p1", Publication: "sluice_p1", Tables: []activities.TableConfig{testTable}})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new after the reader's run", err)
	}
	var next SourceInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Runs != 1 || next.Pipeline != "p1" || len(next.Tables) != 1 {
		t.Fatalf("continued input %+v", next)
	}
	if !equalStrings(calls, []string{"SetupSource", "EnsureTableWorkflows", "ReadStream"}) {
		t.Fatalf("calls %v", calls)
	}
	if running.Phase != StateRunning || running.Source != testSource {
		t.Fatalf("status while reading %+v", running)
	}
}

// TestSourceWorkflowWithoutTablesLeavesThemToTheConfig: an input that lists no tables (what the
// starter makes) keeps them out of every payload: the tables are started from the workers'
// config (EnsureConfiguredTables, with the source and the slot's creation point) and the reader
// gets none either.
func TestSourceWorkflowWithoutTablesLeavesThemToTheConfig(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	Register(env)
	activities.Set{Setup: &activities.Setup{}, Reader: &activities.Reader{}}.Register(env)
	var calls []string
	env.OnActivity(setupActs.SetupSource, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SetupInput) (activities.SetupResult, error) {
			calls = append(calls, "SetupSource")
			if len(in.Tables) != 0 {
				return activities.SetupResult{}, errors.New("tables in the setup input")
			}
			return activities.SetupResult{Source: testSource, Start: sp(10), SlotSince: 7}, nil
		})
	env.OnActivity(setupActs.EnsureConfiguredTables, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EnsureConfiguredInput) error {
			calls = append(calls, "EnsureConfiguredTables")
			if in.Pipeline != "p1" || in.Source != testSource || in.SlotSince != 7 {
				return errors.New("EnsureConfiguredTables lacks the pipeline, the source or the slot's start")
			}
			return nil
		})
	env.OnActivity(readerActs.ReadStream, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(_ context.Context, in activities.ReadStreamInput) (activities.ReadStreamResult, error) {
			calls = append(calls, "ReadStream")
			if len(in.Tables) != 0 || in.Source != testSource || in.SlotSince != 7 {
				return activities.ReadStreamResult{}, errors.New("reader input has tables, or lacks the source or the slot's start")
			}
			return activities.ReadStreamResult{}, nil
		})
	env.ExecuteWorkflow(SourceWorkflowType, SourceInput{Pipeline: "p1", Slot: "sluice_p1", Publication: "sluice_p1"})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new after the reader's run", err)
	}
	if !equalStrings(calls, []string{"SetupSource", "EnsureConfiguredTables", "ReadStream"}) {
		t.Fatalf("calls %v", calls)
	}
}

func TestSourceWorkflowStopsOnNonRetryableReaderError(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	Register(env)
	activities.Set{Setup: &activities.Setup{}, Reader: &activities.Reader{Authority: &activities.Authority{Pipeline: "p1"}}}.Register(env)
	env.OnActivity(setupActs.SetupSource, mock.Anything, mock.Anything).Return(activities.SetupResult{Source: testSource}, nil)
	env.OnActivity(setupActs.EnsureConfiguredTables, mock.Anything, mock.Anything).Return(nil)
	// The real ReadStream on a worker without a source: a non-retryable SourceSetup error stops
	// the workflow at once instead of retrying forever.
	env.ExecuteWorkflow(SourceWorkflowType, SourceInput{Pipeline: "p1"})
	var appErr *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != failure.SourceSetup {
		t.Fatalf("workflow ended with %v, want %s", err, failure.SourceSetup)
	}
}
