package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/workflows"
)

// The reader's states, as `sluice status` shows them.
const (
	readerNotStarted = "not started"
	readerStarting   = "starting" // setting up the slot and publication, starting the tables
	readerRunning    = "running"
	readerRetrying   = "retrying" // the pending activity failed at least once and is retried
	readerFailed     = "failed"   // the SourceWorkflow failed: nothing is read until the cause is fixed
	readerStopped    = "stopped"  // terminated or cancelled (sluice stop), or completed
)

// readerRow is the pipeline's source side in `sluice status`: the SourceWorkflow and its reader.
type readerRow struct {
	Workflow string `json:"workflow"` // Running, Failed, Terminated, ... or NOT STARTED
	State    string `json:"state"`    // readerRunning, readerRetrying, ...
	// Activity is the SourceWorkflow's pending activity (SetupSource, EnsureTableWorkflows,
	// ReadStream) and Attempt its attempt.
	Activity string `json:"activity,omitempty"`
	Attempt  int32  `json:"attempt,omitempty"`
	// Error is the failure of the closed run, or the pending activity's last failure.
	Error string `json:"error,omitempty"`
	// LastHeartbeat is when the reader last reported progress (it does at least every 2 s while
	// it streams); Progress is what it reported.
	LastHeartbeat time.Time                    `json:"last_heartbeat,omitzero"`
	Progress      *activities.ReadStreamResult `json:"progress,omitempty"`
}

// readerStatus describes the pipeline's SourceWorkflow: whether its reader runs, retries (with
// its last error) or failed (with the run's error).
func readerStatus(ctx context.Context, a *app) (readerRow, error) {
	id := workflows.SourceWorkflowID(a.cfg.Pipeline)
	desc, err := a.client.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return readerRow{Workflow: "NOT STARTED", State: readerNotStarted}, nil
	}
	if err != nil {
		return readerRow{}, fmt.Errorf("describing %s: %w", id, err)
	}
	st := desc.GetWorkflowExecutionInfo().GetStatus()
	row := readerRow{Workflow: strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_")}
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		readerActivity(&row, desc.GetPendingActivities())
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		row.State = readerFailed
		if err := a.client.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
			row.Error = closedRunError(err)
		}
	default:
		row.State = readerStopped
	}
	return row, nil
}

// readerActivity fills row from the running SourceWorkflow's pending activity.
func readerActivity(row *readerRow, pending []*workflowpb.PendingActivityInfo) {
	row.State = readerStarting
	for _, p := range pending {
		row.Activity = p.GetActivityType().GetName()
		row.Attempt = p.GetAttempt()
		if f := p.GetLastFailure(); f != nil && p.GetAttempt() > 1 {
			row.State = readerRetrying
			row.Error = failureText(f.GetMessage(), f.GetApplicationFailureInfo().GetType(), f.GetCause().GetMessage())
		}
		if row.Activity != "ReadStream" {
			continue
		}
		if t := p.GetLastHeartbeatTime(); t != nil {
			row.LastHeartbeat = t.AsTime()
		}
		var progress activities.ReadStreamResult
		if d := p.GetHeartbeatDetails(); d != nil && converter.GetDefaultDataConverter().FromPayloads(d, &progress) == nil {
			row.Progress = &progress
		}
		if row.State != readerRetrying && p.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			row.State = readerRunning
		}
	}
}

// failureText is an activity failure as one line: its type, its message and its cause's.
func failureText(msg, typ, cause string) string {
	if typ != "" {
		msg = typ + ": " + msg
	}
	if cause != "" && !strings.Contains(msg, cause) {
		msg += ": " + cause
	}
	return msg
}

// slotStatus reads the pipeline's slot from the source (the config's DSN); an error says why
// it could not be read, which status shows instead of the slot.
func slotStatus(ctx context.Context, a *app) (*source.SlotState, error) {
	sc, err := pipeline.SourceConfigs(a.cfg)(a.cfg.Pipeline)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := source.ReadSlotState(ctx, nil, sc.DSN, sc.Slot)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// bytesText formats a byte count the way a status line reads it: 512 B, 300 KiB, 12 MiB, 3.2 GiB.
func bytesText(b int64) string {
	switch {
	case b < 1<<10:
		return fmt.Sprintf("%d B", b)
	case b < 1<<20:
		return fmt.Sprintf("%d KiB", b>>10)
	case b < 1<<30:
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

// slotLine is the slot's line of `sluice status`.
func slotLine(s *source.SlotState) string {
	if !s.Exists {
		return fmt.Sprintf("%s does not exist (current WAL %s)", s.Slot, s.Current)
	}
	active := "inactive"
	if s.Active {
		active = fmt.Sprintf("active (pid %d)", s.ActivePID)
	}
	safe := "unlimited (max_slot_wal_keep_size -1)"
	if s.SafeWALSize != nil {
		safe = bytesText(*s.SafeWALSize) + " (max_slot_wal_keep_size " + s.MaxSlotWALKeepSize + ")"
	}
	return fmt.Sprintf("%s %s, wal_status %s, confirmed_flush %s, restart %s, current %s, retained WAL %s, safe_wal_size %s",
		s.Slot, active, s.WALStatus, s.ConfirmedFlush, s.Restart, s.Current, bytesText(s.RetainedBytes), safe)
}

// readerLine is the reader's line of `sluice status`.
func readerLine(r readerRow, now time.Time, errText func(string) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (workflow %s", r.State, r.Workflow)
	if r.Activity != "" {
		fmt.Fprintf(&b, ", %s attempt %d", r.Activity, r.Attempt)
	}
	b.WriteString(")")
	if p := r.Progress; p != nil {
		fmt.Fprintf(&b, ", staged up to %s, confirmed %s, %d rows in %d batches this run",
			p.Position.Position, p.Confirmed.Position, p.Rows, p.Batches)
	}
	if !r.LastHeartbeat.IsZero() {
		fmt.Fprintf(&b, ", last heartbeat %s ago", age(now.Sub(r.LastHeartbeat)))
	}
	if r.Error != "" {
		b.WriteString(", error: " + errText(r.Error))
	}
	return b.String()
}
