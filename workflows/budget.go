package workflows

import "time"

// The budget of a TableWorkflow run, kept whatever the backlog, outage or pause length:
//
//   - History: a run continues as new at ContinueAsNewAtEvents events (or earlier when the server
//     suggests it, or after MaxCommitsPerRun commits). An activity that is still running then is
//     cancelled (every stream-phase activity is idempotent) and the run hands over; the events
//     between the trigger and the continue-as-new (the cancellation, signals arriving meanwhile)
//     fit in the margin up to MaxRunEvents.
//   - Payloads: no payload carries a list that grows with the backlog. The workflow holds a
//     window of at most WindowRefs staged-batch refs (and NextBatches/LoadTable return at most
//     WindowBytes of them); the staged files themselves are the durable queue. The
//     continue-as-new input carries counters and the position, no refs. A CommitBatch input
//     carries at most GroupRefs refs.
//   - Events per batch: a backlog commits up to GroupRefs consecutive batches in one
//     CommitBatch, so its history grows by one activity per group, not per batch.
//   - Outages: CommitBatch, NextBatches and LoadTable make StreamAttempts attempts per
//     execution; then the workflow records the failure (status last_error), waits on a timer
//     (backoff up to OutageBackoffMax) and tries again, continuing as new within budget.
//   - Lost workers: every activity heartbeats (the worker's activities.Heartbeats interceptor
//     does it for short ones) with a heartbeat timeout of at most ShortHeartbeat, and so does the
//     snapshot session, so a killed worker delays a table by about ShortHeartbeat plus the retry
//     backoff (measured at most 18.4 s in any activity: docs/architecture.md, bound 30 s).
const (
	// MaxRunEvents is the most history events one TableWorkflow run may have. Temporal warns at
	// 10,240 events and terminates a run at 51,200.
	MaxRunEvents = 10_000
	// MaxPayloadBytes is the most bytes one payload of a TableWorkflow (an activity's input or
	// result, a signal, a continue-as-new input) may have. Temporal warns at 512 KiB and refuses
	// 2 MiB. The table's schema travels in activity inputs: it must stay well under this (about
	// 600 columns), the windows below leave it the rest.
	MaxPayloadBytes = 256 << 10
	// ContinueAsNewAtEvents is the history length at which a run hands over to the next
	// (TableOptions.MaxHistoryEvents may set it lower, never higher).
	ContinueAsNewAtEvents = 8_000
	// MaxRunHistoryBytes is the most bytes of history one run may have. Temporal warns at
	// 10 MiB and terminates a run at 50 MiB. Coalesced signals carry up to 64 refs (about 35 KB)
	// each, so a paused or failing table's run can reach it in events well under
	// ContinueAsNewAtEvents: a run hands over at ContinueAsNewAtBytes.
	MaxRunHistoryBytes = 8 << 20
	// ContinueAsNewAtBytes is the history size at which a run hands over to the next (the
	// server also suggests it, at 4 MB by default; this holds whatever the server's setting).
	ContinueAsNewAtBytes = 4 << 20
	// WindowRefs is the most staged-batch refs a TableWorkflow holds, and a listing returns.
	WindowRefs = 256
	// WindowBytes bounds the JSON of one listed window (a ref is about 600 bytes).
	WindowBytes = 128 << 10
	// GroupRefs is the most staged batches one CommitBatch commits together (grouped commits:
	// a backlog of small batches catches up in few activities and sink commits). Its input
	// carries their refs: about 80 KiB.
	GroupRefs = 128
	// StreamAttempts is the attempts of one execution of a stream-phase activity (CommitBatch,
	// NextBatches, LoadTable, EnsureTable, TableSchema) before the workflow takes over retrying.
	StreamAttempts = 4
	// OutageBackoffMax is the longest wait between two executions of a failing activity.
	OutageBackoffMax = time.Minute
	// ShortHeartbeat is the heartbeat timeout of short activities: a killed worker is noticed
	// after it.
	ShortHeartbeat = 10 * time.Second
)
