package main

import (
	"context"
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

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/workflows"
)

// tableRow is one table's line of `sluice status`.
type tableRow struct {
	Table    string
	Workflow string // RUNNING, FAILED, TERMINATED, ... or NOT STARTED
	Status   workflows.TableStatus
	Err      string
}

func statusCmd(a *app) *cobra.Command {
	var watch bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each table's phase, committed position, rows, lag and last error",
		Args:  cobra.NoArgs,
		RunE: withClient(a, func(cmd *cobra.Command, _ []string) error {
			if watch {
				return watchStatus(cmd.Context(), a, cmd.OutOrStdout(), every)
			}
			rows, err := tableRows(cmd.Context(), a)
			if err != nil {
				return err
			}
			printRows(cmd.OutOrStdout(), a.cfg.Pipeline, rows)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&watch, "watch", false, "keep refreshing, with progress bars during backfill (Ctrl-C to stop)")
	cmd.Flags().DurationVar(&every, "every", 2*time.Second, "refresh interval of --watch")
	return cmd
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

func printRows(w io.Writer, pipeline string, rows []tableRow) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "pipeline %s\n", pipeline)
	fmt.Fprintln(tw, "TABLE\tWORKFLOW\tPHASE\tPOSITION\tROWS\tQUEUED\tLAG\tMAINTAINED\tLAST ERROR")
	now := time.Now()
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Table, r.Workflow, phaseOf(r), positionOf(r),
			rowsOf(r), r.Status.QueueLength, lagOf(r, now), maintainedOf(r, now), oneLine(r.Err))
	}
	_ = tw.Flush()
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
	if s := r.Status.Snapshot; s != nil && !s.Done {
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

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

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
			if s := r.Status.Snapshot; s != nil && !s.Done && s.EstimatedRows > 0 {
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
