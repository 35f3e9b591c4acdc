package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/logkey"
)

var (
	setupActs  *activities.Setup
	readerActs *activities.Reader
)

// SourceInput starts a pipeline's SourceWorkflow. It is plain JSON; credentials are not part of
// it (the workers' configuration holds the DSN and the sink's settings).
type SourceInput struct {
	Pipeline    string `json:"pipeline"`
	Slot        string `json:"slot"`
	Publication string `json:"publication"`
	// Tables are empty in an input the starter makes: the workers' config holds them, and
	// every payload of the workflow stays the same size whatever the number of tables. An
	// input that lists them (a hand-made one, or one of an earlier starter) must list the
	// configured tables exactly as the workers' config has them.
	Tables []activities.TableConfig `json:"tables,omitempty"`
	// Batch limits of the reader (zero: the reader's defaults).
	MaxRows  int      `json:"max_rows,omitempty"`
	MaxBytes int64    `json:"max_bytes,omitempty"`
	MaxWait  Duration `json:"max_wait,omitempty"` // "1s" (a number of nanoseconds is read too)
	// ReaderRunFor bounds one reader run; then the workflow continues as new (default 1 hour).
	ReaderRunFor time.Duration `json:"reader_run_for,omitempty"`
	// Runs counts the runs continued as new so far.
	Runs int `json:"runs,omitempty"`
}

// SourceStatus is the answer to the status query of a SourceWorkflow.
type SourceStatus struct {
	Pipeline string                      `json:"pipeline"`
	Phase    State                       `json:"phase"`
	Source   batch.SourceID              `json:"source"`
	Runs     int                         `json:"runs"`
	LastRead activities.ReadStreamResult `json:"last_read"`
	// LastError is why the run failed (Phase is then StateFailed): a query of the failed run
	// answers with it. A failure being retried shows in the pending activity (`sluice status`,
	// `temporal workflow describe`), not here.
	LastError string `json:"last_error,omitempty"`
}

// SourceWorkflow runs one pipeline's source side: SetupSource (slot, publication, schemas),
// EnsureTableWorkflows (one TableWorkflow per table, started by signal-with-start from the
// activity so tables are independent top-level workflows that the operator can resume by ID),
// then the long-running, heartbeating reader, which stages batches, signals the tables and
// confirms the slot only up to the minimum safe position. When the reader's run ends it
// continues as new; every run sets up again (idempotent), which picks up schema changes.
func SourceWorkflow(ctx workflow.Context, in SourceInput) error {
	st := SourceStatus{Pipeline: in.Pipeline, Phase: StateStarting, Runs: in.Runs}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (SourceStatus, error) { return st, nil }); err != nil {
		return fmt.Errorf("registering status query: %w", err)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		SearchPipeline.ValueSet(in.Pipeline), SearchPhase.ValueSet(string(StateStarting))); err != nil {
		return fmt.Errorf("upserting search attributes of pipeline %s: %w", in.Pipeline, err)
	}

	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		// SetupSource heartbeats through activities.Heartbeats, EnsureTableWorkflows per table.
		HeartbeatTimeout: ShortHeartbeat,
		RetryPolicy:      RetryForever(),
	})
	failed := func(err error) error {
		st.Phase, st.LastError = StateFailed, err.Error()
		showSourceDetails(ctx, st)
		return err
	}
	showSourceDetails(ctx, st)
	// A reconfigure sent before this run set up is served by this run's setup.
	reconfigure := workflow.GetSignalChannel(ctx, SignalReconfigure)
	for reconfigure.ReceiveAsync(nil) {
	}
	setupIn := activities.SetupInput{Pipeline: in.Pipeline, Slot: in.Slot, Publication: in.Publication, Tables: in.Tables}
	var setup activities.SetupResult
	setupCtx := withSummary(actx, fmt.Sprintf("set up slot %s and publication %s", in.Slot, in.Publication))
	if err := workflow.ExecuteActivity(setupCtx, setupActs.SetupSource, setupIn).Get(ctx, &setup); err != nil {
		return failed(err)
	}
	st.Source = setup.Source
	// An input that lists its tables (as the starter did before) gets them back in the setup's
	// result; one that lists none leaves them to the workers' config.
	var ensure workflow.Future
	if len(setup.Tables) > 0 {
		ensureCtx := withSummary(actx, fmt.Sprintf("start the %d table workflow(s)", len(setup.Tables)))
		ensure = workflow.ExecuteActivity(ensureCtx, setupActs.EnsureTableWorkflows, setup.Tables)
	} else {
		ensureCtx := withSummary(actx, "start the configured tables' workflows")
		ensure = workflow.ExecuteActivity(ensureCtx, setupActs.EnsureConfiguredTables,
			activities.EnsureConfiguredInput{Pipeline: in.Pipeline, Source: setup.Source, SlotSince: setup.SlotSince, Joined: setup.Joined})
	}
	if err := ensure.Get(ctx, nil); err != nil {
		return failed(err)
	}

	runFor := in.ReaderRunFor
	if runFor <= 0 {
		runFor = time.Hour
	}
	st.Phase = StateRunning
	showSourceDetails(ctx, st)
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchPhase.ValueSet(string(StateRunning))); err != nil {
		return fmt.Errorf("upserting search attributes of pipeline %s: %w", in.Pipeline, err)
	}
	rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: runFor + 10*time.Minute,
		// The reader heartbeats at least every second; a lost worker's stream moves to another
		// worker after this.
		HeartbeatTimeout: ShortHeartbeat,
		RetryPolicy:      RetryForever(),
		Summary:          fmt.Sprintf("read slot %s for %s", in.Slot, runFor),
		// A reconfigure cancels the reader; the next run starts its reader once this one has
		// stopped streaming from the slot (a slot takes one reader at a time).
		WaitForCancellation: true,
	})
	readIn := activities.ReadStreamInput{
		Pipeline: in.Pipeline, Slot: in.Slot, Publication: in.Publication, Source: setup.Source,
		Tables: setup.Tables, SlotSince: setup.SlotSince, Joined: setup.Joined, RunFor: runFor, MaxRows: in.MaxRows, MaxBytes: in.MaxBytes, MaxWait: time.Duration(in.MaxWait),
	}
	if err := readUntilReconfigured(ctx, rctx, reconfigure, readIn, &st.LastRead); err != nil {
		return failed(err)
	}
	next := in
	next.Runs++
	return workflow.NewContinueAsNewError(ctx, SourceWorkflowType, next)
}

// readUntilReconfigured runs the reader until its run ends or a reconfigure signal arrives;
// then it cancels the reader and waits for it to let go of the slot, so that the run continued
// as new sets up and reads with the workers' current config (ReadStream takes its tables from
// it at start). A reader cancelled this way is no failure.
func readUntilReconfigured(ctx, rctx workflow.Context, reconfigure workflow.ReceiveChannel, in activities.ReadStreamInput, out *activities.ReadStreamResult) error {
	rctx, cancel := workflow.WithCancel(rctx)
	defer cancel()
	read := workflow.ExecuteActivity(rctx, readerActs.ReadStream, in)
	reconfigured := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(read, func(workflow.Future) {})
	sel.AddReceive(reconfigure, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		reconfigured = true
	})
	sel.Select(ctx)
	if !reconfigured {
		return read.Get(ctx, out)
	}
	workflow.GetLogger(ctx).Info("reconfigure: ending the reader's run to read with the workers' current config", logkey.Pipeline, in.Pipeline)
	cancel()
	_ = read.Get(ctx, out) // cancelled (or ended meanwhile): the next run reads on from the slot
	for reconfigure.ReceiveAsync(nil) {
	}
	return nil
}
