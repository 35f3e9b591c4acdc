package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/batch"
)

// TaskQueue is the default task queue of every workflow and activity.
const TaskQueue = "sluice"

// Workflow type names, as registered and as `temporal workflow start --type` takes them.
const (
	SourceWorkflowType = "SourceWorkflow"
	TableWorkflowType  = "TableWorkflow"
)

// Signal names.
const (
	// SignalBatches delivers staged batches ([]staging.BatchRef, in the order the reader staged
	// them) to a TableWorkflow: the reader coalesces a table's refs into one signal (at most
	// reader.MaxSignalRefs), so a backlog costs a few history events per signal, not per batch.
	SignalBatches = "batches"
	// SignalBatch delivers one staging.BatchRef to a TableWorkflow: what readers sent before
	// SignalBatches. Still received, for signals in flight from a reader of an earlier version.
	SignalBatch = "batch"
	// SignalPause stops committing after the current batch; refs keep queueing.
	SignalPause = "pause"
	// SignalResume undoes pause. Sent with signal-with-start to a failed table (after fixing a
	// poison batch), it starts a new run that reloads the position from the sink and the queue
	// from staging.
	SignalResume = "resume"
	// SignalResync discards the table's target and position and backfills it again.
	SignalResync = "resync"
	// SignalReconfigure asks a SourceWorkflow to apply its workers' config now: it ends the
	// reader's run and continues as new, whose setup adds the tables the config gained to the
	// publication and starts their workflows, and whose reader reads the config's tables.
	// `sluice start` sends it (signal-with-start).
	SignalReconfigure = "reconfigure"
	// SignalStop fails the table's run with a non-retryable error (a StopRequest, sent by the
	// reader when a partition change the WAL cannot show meets tables[].on_partition_change:
	// stop): the table stops until the operator resyncs it.
	SignalStop = "stop"
)

// QueryStatus returns a TableStatus (TableWorkflow) or a SourceStatus (SourceWorkflow).
const QueryStatus = "status"

// Search attributes (type Keyword), registered once per namespace:
//
//	temporal operator search-attribute create --name SluicePipeline --type Keyword
//
// and likewise for SluiceTable and SluicePhase.
var (
	SearchPipeline = temporal.NewSearchAttributeKeyKeyword("SluicePipeline")
	SearchTable    = temporal.NewSearchAttributeKeyKeyword("SluiceTable")
	SearchPhase    = temporal.NewSearchAttributeKeyKeyword("SluicePhase")
)

// SearchAttributes are Sluice's custom search attributes (all Keyword): what the workflows
// upsert, `sluice status` and the worker's failed-tables metric list by, and the Web UI filters on.
// A namespace must have them before a pipeline starts there (`sluice setup-temporal`).
var SearchAttributes = []temporal.SearchAttributeKeyKeyword{SearchPipeline, SearchTable, SearchPhase}

// State is where a table's or a pipeline's workflow stands. The status query shows it as
// "phase" and the SluicePhase search attribute holds it (names operators query by, so they
// stay). It is not a batch's phase (batch.Phase: snapshot or stream): a table in StateBackfill
// applies snapshot-phase rows, one in StateStream commits stream-phase batches.
type State string

// The states of a TableWorkflow, and StateStarting and StateRunning of a SourceWorkflow.
const (
	StateStarting State = "starting"
	StateBackfill State = "backfill"
	StateStream   State = "stream"
	StatePaused   State = "paused"
	StateFailed   State = "failed"
	StateRunning  State = "running" // SourceWorkflow: the reader runs
	StateRemoved  State = "removed" // the workers' config no longer lists the table (TableRemoved): its run ended; see `sluice remove`
)

// SourceWorkflowID is the ID of a pipeline's SourceWorkflow: sluice/<pipeline>/source.
func SourceWorkflowID(pipeline string) string { return "sluice/" + pipeline + "/source" }

// TableWorkflowID is the ID of a table's workflow: sluice/<pipeline>/<schema.table>.
func TableWorkflowID(pipeline string, table batch.TableName) string {
	return "sluice/" + pipeline + "/" + table.String()
}

// RetryForever is the retry policy of activities and of TableWorkflow runs: transient failures
// retry with backoff without limit; the pending activity's attempt count and last failure show in
// `temporal workflow describe` and the Web UI. Non-retryable ApplicationErrors (PoisonBatch,
// SourceMismatch, ...) stop at once.
func RetryForever() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    0,
	}
}
