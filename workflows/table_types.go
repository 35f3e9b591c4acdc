package workflows

import (
	"time"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/batch"
)

// TableOptions tune a TableWorkflow; zero values take the defaults.
type TableOptions struct {
	// MaxCommitsPerRun continues as new after this many commits (default 500).
	MaxCommitsPerRun int `json:"max_commits_per_run,omitempty"`
	// MaxHistoryEvents continues as new when the run's history grows past this (default and
	// upper bound ContinueAsNewAtEvents), or earlier when the server suggests it.
	MaxHistoryEvents int `json:"max_history_events,omitempty"`
	// SnapshotChunkRows is the rows per CopyChunk of a backfill (default 50000).
	SnapshotChunkRows int `json:"snapshot_chunk_rows,omitempty"`
	// SnapshotChunkBytes sizes a backfill's chunks by bytes too (0: by rows only).
	SnapshotChunkBytes int64 `json:"snapshot_chunk_bytes,omitempty"`
	// SnapshotParallelism is how many key ranges a backfill reads at once (0 or 1: one).
	SnapshotParallelism int `json:"snapshot_parallelism,omitempty"`
	// SnapshotApplyBytes groups a backfill's chunks into sink writes of up to this many bytes
	// (0: the activity's default, 64 MiB; the starter sets an eighth of batch.max_bytes).
	SnapshotApplyBytes int64 `json:"snapshot_apply_bytes,omitempty"`
	// CommitTimeout bounds one CommitBatch attempt (default 30 minutes); it heartbeats, so a lost
	// worker is noticed after CommitHeartbeat (default ShortHeartbeat; the worker heartbeats the commit every quarter of it).
	CommitTimeout   time.Duration `json:"commit_timeout,omitempty"`
	CommitHeartbeat time.Duration `json:"commit_heartbeat,omitempty"`
	// MaintainEveryCommits runs the MaintainTable activity (the sink's compaction and snapshot
	// expiry) after every this many sink commits that wrote rows (batches committed together
	// are one); 0 (the default) never.
	MaintainEveryCommits int `json:"maintain_every_commits,omitempty"`
	// A backlog of staged batches is committed in groups, several consecutive batches in one
	// CommitBatch and one sink commit. A group has at most CommitGroupRefs batches (default and
	// upper bound GroupRefs; 1 commits every batch alone) and, beyond its first batch, at most
	// CommitGroupBytes bytes of staged files (default 8 MiB) and CommitGroupRows rows (default
	// 1,000,000): the worker holds a group's rows in memory.
	CommitGroupRefs  int   `json:"commit_group_refs,omitempty"`
	CommitGroupBytes int64 `json:"commit_group_bytes,omitempty"`
	CommitGroupRows  int64 `json:"commit_group_rows,omitempty"`
}

func (o TableOptions) withDefaults() TableOptions {
	if o.MaxCommitsPerRun <= 0 {
		o.MaxCommitsPerRun = 500
	}
	if o.MaxHistoryEvents <= 0 || o.MaxHistoryEvents > ContinueAsNewAtEvents {
		o.MaxHistoryEvents = ContinueAsNewAtEvents
	}
	if o.SnapshotChunkRows <= 0 {
		o.SnapshotChunkRows = 50000
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = 30 * time.Minute
	}
	if o.CommitHeartbeat <= 0 {
		o.CommitHeartbeat = ShortHeartbeat
	}
	if o.CommitGroupRefs <= 0 || o.CommitGroupRefs > GroupRefs {
		o.CommitGroupRefs = GroupRefs
	}
	if o.CommitGroupBytes <= 0 {
		o.CommitGroupBytes = 8 << 20
	}
	if o.CommitGroupRows <= 0 {
		o.CommitGroupRows = 1_000_000
	}
	return o
}

// TableInput starts a TableWorkflow. It is plain JSON, so `temporal workflow start --type
// TableWorkflow --input '{"pipeline":"p","spec":{...},"sink":{"name":"lake"}}'` works too.
type TableInput struct {
	activities.TableConfig
	Options TableOptions `json:"options,omitzero"`
	// State is what a run carries into the next through continue-as-new; starts leave it nil.
	// Every run still reads the position from the sink and lists staging first: the sink, not the
	// carried state, says where the table stands.
	State *TableState `json:"state,omitempty"`
}

// TableState is what continue-as-new carries: a few counters, never the staged batches (the
// next run lists them from staging), so its size does not grow with the backlog.
type TableState struct {
	Position batch.SourcePosition `json:"position"`
	Paused   bool                 `json:"paused"`
	Rows     int64                `json:"rows"`    // rows committed by this workflow, all runs
	Batches  int64                `json:"batches"` // batches committed (or skipped as covered)
	Runs     int                  `json:"runs"`    // runs continued as new so far
	// SinceMaintenance counts the batches that wrote rows since the last MaintainTable started.
	SinceMaintenance int                `json:"since_maintenance,omitempty"`
	LastMaintenance  *MaintenanceStatus `json:"last_maintenance,omitempty"`
	// LastError and Failures are the current failure streak of a stream-phase activity (an
	// outage), carried so the status and the backoff go on across runs.
	LastError string `json:"last_error,omitempty"`
	Failures  int    `json:"failures,omitempty"`
}

// StopRequest is SignalStop's argument: the error type and message the run fails with.
type StopRequest struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	// Epoch is the backfill whose content the reason was found against (catalogwatch.Epoch; ""
	// when unknown): a run that backfilled from another snapshot since ignores the request,
	// which was meant for the content that backfill replaced (the reader asks again if the
	// reason still applies).
	Epoch string `json:"epoch,omitempty"`
}

// MaintenanceStatus is the outcome of a table's latest MaintainTable run.
type MaintenanceStatus struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"` // zero while it runs
	// Batches is the table's committed batch count when it started.
	Batches int64                      `json:"batches"`
	Result  *activities.MaintainResult `json:"result,omitempty"`
	// Error is why it failed after its retries; the table went on committing regardless.
	Error string `json:"error,omitempty"`
}

// BackfillProgress is a backfill's progress.
type BackfillProgress struct {
	Rows          int64                `json:"rows"`
	EstimatedRows int64                `json:"estimated_rows"`
	Chunks        int64                `json:"chunks,omitempty"` // chunks read so far
	Position      batch.SourcePosition `json:"position"`         // the snapshot's consistent point
	Done          bool                 `json:"done"`
}

// TableStatus is the answer to the status query of a TableWorkflow.
type TableStatus struct {
	Pipeline    string               `json:"pipeline"`
	Table       string               `json:"table"`
	Phase       State                `json:"phase"`
	Position    batch.SourcePosition `json:"position"`
	HasPosition bool                 `json:"has_position"`
	Rows        int64                `json:"rows"`
	Batches     int64                `json:"batches"`
	// QueueLength is how many staged batches the table has not committed, as last seen: the
	// workflow's window plus those staged beyond it.
	QueueLength int `json:"queue_length"`
	// LagBytes is how much WAL the queued batches reach past the committed position.
	LagBytes uint64 `json:"lag_bytes"`
	// OldestQueuedCommit is the source commit time of the oldest queued change (zero when the
	// queue is empty or holds only snapshot batches): the lag in seconds is now minus this.
	OldestQueuedCommit time.Time `json:"oldest_queued_commit,omitzero"`
	Paused             bool      `json:"paused"`
	LastError          string    `json:"last_error,omitempty"`
	// Backfill is the table's backfill, once one began (the JSON name is the one status queries
	// have always answered with).
	Backfill *BackfillProgress `json:"snapshot,omitempty"`
	// LastMaintenance is the latest table maintenance (MaintainTable), when one ran.
	LastMaintenance *MaintenanceStatus `json:"last_maintenance,omitempty"`
}
