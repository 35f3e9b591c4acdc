package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/workflows"
)

// tableRow is one table's line of `sluice status`.
type tableRow struct {
	Table    string                `json:"table"`
	Workflow string                `json:"workflow"` // Running, Failed, Terminated, ... or NOT STARTED
	Status   workflows.TableStatus `json:"status"`
	Err      string                `json:"error,omitempty"`
	// HoldsBytes is how much WAL the table's queued batches make the slot keep: from its
	// committed position (its next batch starts after it) to the server's current position; 0
	// when nothing is queued.
	HoldsBytes int64 `json:"holds_wal_bytes"`
	// Failed: the table's latest run failed (or timed out); it stays stopped until resumed.
	Failed bool `json:"failed"`
	// Removed: the config no longer lists the table, which is still in the publication or has
	// a workflow; its staged batches and its changes hold the slot until `sluice remove`.
	// HeldSince is the commit time of its first change the reader holds the slot at.
	Removed   bool      `json:"removed,omitempty"`
	HeldSince time.Time `json:"held_since,omitzero"`
}

// statusReport is everything `sluice status` shows, and its --output json.
type statusReport struct {
	Pipeline string            `json:"pipeline"`
	Reader   readerRow         `json:"reader"`
	Slot     *source.SlotState `json:"slot,omitempty"`
	// SlotError says why the slot could not be read (the source is unreachable).
	SlotError string     `json:"slot_error,omitempty"`
	Tables    []tableRow `json:"tables"`
	// RemovedError says why the tables removed from the config could not be listed.
	RemovedError string `json:"removed_error,omitempty"`
	// Problems are what makes the status exit non-zero: a failed reader, a failed table, a lost
	// slot.
	Problems []string `json:"problems,omitempty"`
}

func statusCmd(a *app) *cobra.Command {
	var watch bool
	var every time.Duration
	var output string
	var wide bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the reader, the slot and each table's phase, committed position, rows, lag and last error; exit 1 when any failed",
		Args:  cobra.NoArgs,
		RunE: withClient(a, func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: want text or json", output)
			}
			if watch {
				return watchStatus(cmd.Context(), a, cmd.OutOrStdout(), every)
			}
			rep, err := buildReport(cmd.Context(), a)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				printReport(cmd.OutOrStdout(), rep, wide)
			}
			if len(rep.Problems) > 0 {
				return fmt.Errorf("pipeline %s is not healthy: %s", rep.Pipeline, strings.Join(rep.Problems, "; "))
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&watch, "watch", false, "keep refreshing, with progress bars during backfill (Ctrl-C to stop)")
	cmd.Flags().DurationVar(&every, "every", 2*time.Second, "refresh interval of --watch")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().BoolVar(&wide, "wide", false, "show whole errors in the text output (by default cut at 160 characters); --output json always has them whole")
	return cmd
}

// buildReport reads the reader (the SourceWorkflow), the slot (from the source) and every
// table, and names what has failed.
func buildReport(ctx context.Context, a *app) (statusReport, error) {
	rep := statusReport{Pipeline: a.cfg.Pipeline}
	var err error
	if rep.Reader, err = readerStatus(ctx, a); err != nil {
		return rep, err
	}
	if rep.Slot, err = slotStatus(ctx, a); err != nil {
		rep.SlotError = err.Error()
	}
	if rep.Tables, err = tableRows(ctx, a); err != nil {
		return rep, err
	}
	if err := rep.addRemoved(ctx, a); err != nil {
		return rep, err
	}
	rep.assess()
	return rep, nil
}

// assess fills in what each table holds of the slot and the report's problems; a failed
// reader is shown on every table that has no error of its own (none of them receives changes).
func (rep *statusReport) assess() {
	if rep.Reader.State == readerFailed {
		rep.Problems = append(rep.Problems, "the reader failed: "+oneLine(rep.Reader.Error))
	}
	if s := rep.Slot; s != nil {
		switch {
		case s.Lost():
			rep.Problems = append(rep.Problems, fmt.Sprintf("replication slot %s was invalidated (wal_status lost)", s.Slot))
		case !s.Exists && rep.Reader.State != readerNotStarted && rep.Reader.State != readerStopped:
			rep.Problems = append(rep.Problems, fmt.Sprintf("replication slot %s does not exist", s.Slot))
		}
	}
	for i := range rep.Tables {
		r := &rep.Tables[i]
		if rep.Slot != nil && r.Status.HasPosition && r.Status.QueueLength > 0 {
			r.HoldsBytes = max(0, int64(rep.Slot.Current)-int64(r.Status.Position.Position.LSN))
		}
		if r.Removed {
			rep.assessRemoved(r)
		}
		if r.Failed {
			rep.Problems = append(rep.Problems, "table "+r.Table+" failed")
		}
		if r.Err == "" && rep.Reader.State == readerFailed {
			r.Err = "the reader failed, no changes arrive: " + rep.Reader.Error
		}
	}
}

// tableRows queries every configured table's workflow.
func tableRows(ctx context.Context, a *app) ([]tableRow, error) {
	var rows []tableRow
	for _, t := range a.cfg.Tables {
		row, err := tableStatus(ctx, a, t)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func tableStatus(ctx context.Context, a *app, t config.Table) (tableRow, error) {
	name, _ := t.SourceName()
	return tableStatusOf(ctx, a, name)
}

// tableStatusOf is tableStatus of a table by its name.
func tableStatusOf(ctx context.Context, a *app, name batch.TableName) (tableRow, error) {
	id := workflows.TableWorkflowID(a.cfg.Pipeline, name)
	row := tableRow{Table: name.String()}
	desc, err := a.client.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		row.Workflow = "NOT STARTED"
		return row, nil
	}
	if err != nil {
		return row, fmt.Errorf("describing %s: %w", id, err)
	}
	st := desc.GetWorkflowExecutionInfo().GetStatus()
	row.Workflow = strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_")
	row.Failed = st == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED || st == enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT
	if st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		// A closed run: its result says why (a PoisonBatch names the table, range and cause).
		if err := a.client.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
			row.Err = closedRunError(err)
		}
	}
	resp, err := a.client.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		if row.Err == "" {
			row.Err = "status query: " + err.Error()
		}
		return row, nil
	}
	if err := resp.Get(&row.Status); err != nil {
		return row, fmt.Errorf("decoding the status of %s: %w", id, err)
	}
	if row.Err == "" {
		row.Err = row.Status.LastError
	}
	return row, nil
}

// closedRunError names a closed run's failure by its type (PoisonBatch, SourceSetup, ...) and
// cause, rather than by the client's generic wrapping.
func closedRunError(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() != "" {
		return appErr.Type() + ": " + appErr.Error()
	}
	var term *temporal.TerminatedError
	if errors.As(err, &term) {
		return "terminated (sluice stop or by hand): start or resume the table"
	}
	return err.Error()
}

// printReport writes the text status; wide keeps errors whole (on one line) instead of cut.
func printReport(w io.Writer, rep statusReport, wide bool) {
	now := time.Now()
	errText := oneLine
	if wide {
		errText = flatten
	}
	fmt.Fprintf(w, "pipeline %s\n", rep.Pipeline)
	fmt.Fprintf(w, "reader: %s\n", readerLine(rep.Reader, now, errText))
	if rep.Slot != nil {
		fmt.Fprintf(w, "slot:   %s\n", slotLine(rep.Slot))
	} else {
		fmt.Fprintf(w, "slot:   could not be read: %s\n", errText(rep.SlotError))
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tWORKFLOW\tPHASE\tPOSITION\tROWS\tQUEUED\tLAG\tHOLDS WAL\tMAINTAINED\tLAST ERROR")
	for _, r := range rep.Tables {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Table, r.Workflow, phaseOf(r), positionOf(r),
			rowsOf(r), r.Status.QueueLength, lagOf(r, now), holdsOf(r, now), maintainedOf(r, now), errText(r.Err))
	}
	_ = tw.Flush()
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	if rep.RemovedError != "" {
		fmt.Fprintf(w, "tables removed from the config: could not be listed: %s\n", errText(rep.RemovedError))
	}
}

// holdsOf shows how much WAL the table makes the slot keep and, when its queue holds streamed
// changes, since when (the source commit time of the oldest).
func holdsOf(r tableRow, now time.Time) string {
	if r.HoldsBytes == 0 {
		return "-"
	}
	s := bytesText(r.HoldsBytes)
	if t := r.Status.OldestQueuedCommit; !t.IsZero() && (r.HeldSince.IsZero() || t.Before(r.HeldSince)) {
		s += " since " + age(now.Sub(t))
	} else if t := r.HeldSince; !t.IsZero() {
		s += " since " + age(now.Sub(t))
	}
	return s
}

func phaseOf(r tableRow) string {
	if r.Status.Phase == "" {
		return "-"
	}
	if r.Status.Paused {
		return string(r.Status.Phase) + " (paused)"
	}
	return string(r.Status.Phase)
}

func positionOf(r tableRow) string {
	if !r.Status.HasPosition {
		return "none"
	}
	return r.Status.Position.Position.String()
}

func rowsOf(r tableRow) string {
	if s := r.Status.Backfill; s != nil && !s.Done {
		return fmt.Sprintf("%d of ~%d (backfill)", s.Rows, s.EstimatedRows)
	}
	return fmt.Sprint(r.Status.Rows)
}

// lagOf shows how much WAL the queued batches reach past the committed position and, when the
// queue holds streamed changes, how long ago the oldest of them was committed in the source.
func lagOf(r tableRow, now time.Time) string {
	b := r.Status.LagBytes
	var s string
	switch {
	case b == 0:
		s = "0"
	case b < 1<<20:
		s = fmt.Sprintf("%d KiB", b>>10)
	default:
		s = fmt.Sprintf("%d MiB", b>>20)
	}
	if t := r.Status.OldestQueuedCommit; !t.IsZero() {
		s += ", " + age(now.Sub(t))
	}
	return s
}

// maintainedOf shows when the table's last maintenance (Iceberg compaction and expiry) ran and
// whether it failed; "-" when none has run.
func maintainedOf(r tableRow, now time.Time) string {
	m := r.Status.LastMaintenance
	switch {
	case m == nil:
		return "-"
	case m.Finished.IsZero():
		return "running"
	case m.Error != "":
		return age(now.Sub(m.Finished)) + " ago (failed)"
	}
	return age(now.Sub(m.Finished)) + " ago"
}

// age formats a duration the way a status line reads it: 850ms, 12s, 4m10s, 3h5m.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return trimZeroSeconds(d.Round(time.Second).String())
	}
	return trimZeroSeconds(d.Round(time.Minute).String())
}

// trimZeroSeconds turns "4m0s" into "4m" and "3h5m0s" into "3h5m".
func trimZeroSeconds(s string) string {
	if strings.HasSuffix(s, "m0s") {
		return strings.TrimSuffix(s, "0s")
	}
	return s
}

// oneLine is s on one line, cut at 160 characters.
func oneLine(s string) string {
	s = flatten(s)
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// flatten is s on one line, whole.
func flatten(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// watchStatus redraws the status until ctx ends: a progress bar per table (rows copied of the
// estimate during backfill, committed rows after) with phase, position and lag beside it.
func watchStatus(ctx context.Context, a *app, w io.Writer, every time.Duration) error {
	p := mpb.NewWithContext(ctx, mpb.WithOutput(w), mpb.WithRefreshRate(every/2))
	bars := map[string]*mpb.Bar{}
	info := map[string]*string{}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		rows, err := tableRows(ctx, a)
		if err != nil && ctx.Err() == nil {
			return err
		}
		for _, r := range rows {
			bar, ok := bars[r.Table]
			if !ok {
				label := new(string)
				info[r.Table] = label
				name := r.Table
				bar = p.AddBar(0,
					mpb.PrependDecorators(decor.Name(name, decor.WC{W: len(name) + 1, C: decor.DindentRight})),
					mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return *label })))
				bars[r.Table] = bar
			}
			*info[r.Table] = fmt.Sprintf("%s %s  pos %s  rows %s  lag %s  %s", r.Workflow, phaseOf(r), positionOf(r), rowsOf(r), lagOf(r, time.Now()), oneLine(r.Err))
			if s := r.Status.Backfill; s != nil && !s.Done && s.EstimatedRows > 0 {
				bar.SetTotal(max(s.EstimatedRows, s.Rows), false)
				bar.SetCurrent(s.Rows)
			} else {
				bar.SetTotal(max(r.Status.Rows, 1), false)
				bar.SetCurrent(r.Status.Rows)
			}
		}
		select {
		case <-ctx.Done():
			for _, b := range bars {
				b.Abort(false)
			}
			p.Wait()
			return nil
		case <-tick.C:
		}
	}
}
