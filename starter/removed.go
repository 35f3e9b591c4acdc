package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
	"github.com/sluicecdc/sluice/workflows"
)

// defaultRemoveWait is how long `sluice remove` waits, unless told otherwise (--wait), for the
// slot to move past the removed table's changes once the reader let go of them.
const defaultRemoveWait = time.Minute

// removedTable is a table of the pipeline that the config no longer lists: in the publication,
// or with a TableWorkflow, or both. Its staged batches and the reader's hold keep the slot's WAL
// until `sluice remove` forgets it.
type removedTable struct {
	Table         batch.TableName
	InPublication bool
	Workflow      enumspb.WorkflowExecutionStatus // UNSPECIFIED: none
}

// configured reports whether the config lists table (by source).
func configured(cfg *config.Config, table batch.TableName) bool {
	for _, t := range cfg.Tables {
		if name, _ := t.SourceName(); name == table {
			return true
		}
	}
	return false
}

// findRemoved lists the pipeline's tables that the config no longer lists: the publication's
// tables (read now from the source) and the tables with a TableWorkflow (Temporal's visibility,
// by the SluicePipeline search attribute), less the configured ones.
func findRemoved(ctx context.Context, a *app) ([]removedTable, error) {
	sc, err := pipeline.SourceConfigs(a.cfg)(a.cfg.Pipeline)
	if err != nil {
		return nil, err
	}
	pub, err := source.ReadPublished(ctx, sc.DSN, sc.Publication)
	if err != nil {
		return nil, fmt.Errorf("reading publication %s: %w", sc.Publication, err)
	}
	found := map[batch.TableName]*removedTable{}
	for _, t := range pub.Tables {
		if !configured(a.cfg, t) {
			found[t] = &removedTable{Table: t, InPublication: true}
		}
	}
	query := fmt.Sprintf("%s = '%s' AND WorkflowType = '%s'", workflows.SearchPipeline.GetName(),
		strings.ReplaceAll(a.cfg.Pipeline, "'", "''"), workflows.TableWorkflowType)
	prefix := workflows.TableWorkflowID(a.cfg.Pipeline, batch.TableName{})
	prefix = prefix[:len(prefix)-1] // "sluice/<pipeline>/"
	var token []byte
	for {
		resp, err := a.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("listing the table workflows of pipeline %s: %w", a.cfg.Pipeline, err)
		}
		for _, e := range resp.GetExecutions() {
			schema, name, ok := strings.Cut(strings.TrimPrefix(e.GetExecution().GetWorkflowId(), prefix), ".")
			t := batch.TableName{Schema: schema, Name: name}
			if !ok || configured(a.cfg, t) {
				continue
			}
			// A closed workflow of a table no longer published was forgotten (sluice remove).
			if found[t] == nil && e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				found[t] = &removedTable{Table: t, InPublication: pub.Has(t) && !pub.AllTables}
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	out := make([]removedTable, 0, len(found))
	for _, r := range found {
		desc, err := a.client.DescribeWorkflowExecution(ctx, workflows.TableWorkflowID(a.cfg.Pipeline, r.Table), "")
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
		case err != nil:
			return nil, fmt.Errorf("describing the workflow of table %s: %w", r.Table, err)
		default:
			r.Workflow = desc.GetWorkflowExecutionInfo().GetStatus()
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(x, y removedTable) int { return strings.Compare(x.Table.String(), y.Table.String()) })
	return out, nil
}

// stopRemoved stops the running workflows of the tables the config no longer lists (a
// termination: nothing committed is undone, the staged batches stay) and says what each still
// holds; `sluice start` calls it.
func stopRemoved(ctx context.Context, a *app, out io.Writer) error {
	removed, err := findRemoved(ctx, a)
	if err != nil {
		return err
	}
	for _, r := range removed {
		id := workflows.TableWorkflowID(a.cfg.Pipeline, r.Table)
		if r.Workflow == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			if err := a.client.TerminateWorkflow(ctx, id, "", "removed from the config of pipeline "+a.cfg.Pipeline); err != nil {
				var notFound *serviceerror.NotFound
				if !errors.As(err, &notFound) {
					return fmt.Errorf("stopping the workflow of removed table %s: %w", r.Table, err)
				}
			}
		}
		fmt.Fprintf(out, "  table %s: removed from the config: its workflow is stopped; its staged batches and its changes hold the slot "+
			"until `sluice remove --config %s --table %s` (or add it back and run `sluice start`)\n", r.Table, a.configPath, r.Table)
	}
	return nil
}

func removeCmd(a *app) *cobra.Command {
	var table string
	var yes bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Forget a table removed from the config: its staged batches, its workflow, its place in the publication; releases its hold on the slot (needs --yes)",
		Args:  cobra.NoArgs,
		RunE: withClient(a, func(cmd *cobra.Command, _ []string) error {
			name, ok := (config.Table{Source: table}).SourceName()
			if !ok {
				return fmt.Errorf("--table %q: want schema.table", table)
			}
			for _, t := range a.cfg.Tables {
				if n, _ := t.SourceName(); n == name || t.Target == table {
					return fmt.Errorf("table %s is in the config of pipeline %s (tables[], target %s): remove it from tables[] first, "+
						"restart the workers with that file and run `sluice start`, then `sluice remove`", n, a.cfg.Pipeline, t.Target)
				}
			}
			return removeTable(cmd.Context(), a, name, yes, wait, cmd.OutOrStdout())
		}),
	}
	cmd.Flags().StringVar(&table, "table", "", "the removed table (schema.table)")
	cmd.Flags().BoolVar(&yes, "yes", false, "really forget the table")
	cmd.Flags().DurationVar(&wait, "wait", defaultRemoveWait, "how long to wait for the slot to move past the table's changes (0: do not wait); the hold is released either way")
	_ = cmd.MarkFlagRequired("table")
	return cmd
}

// removeTable forgets a table the config no longer lists; without yes it only says what it
// would do. It waits up to wait for the slot to move past the table's changes.
func removeTable(ctx context.Context, a *app, table batch.TableName, yes bool, wait time.Duration, out io.Writer) error {
	sc, err := pipeline.SourceConfigs(a.cfg)(a.cfg.Pipeline)
	if err != nil {
		return err
	}
	removed, err := findRemoved(ctx, a)
	if err != nil {
		return err
	}
	store, err := staging.Open(ctx, a.cfg.Staging.URL, "", "")
	if err != nil {
		return fmt.Errorf("opening staging.url: %w", err)
	}
	defer store.Close()
	refs, err := store.List(ctx, a.cfg.Pipeline, table)
	if err != nil {
		return fmt.Errorf("listing the staged batches of table %s: %w", table, err)
	}
	r := removedTable{Table: table}
	if i := slices.IndexFunc(removed, func(r removedTable) bool { return r.Table == table }); i >= 0 {
		r = removed[i]
	} else if len(refs) == 0 {
		return fmt.Errorf("table %s: pipeline %s has no trace of it (not in publication %s, no running workflow, no staged batch): nothing to remove",
			table, a.cfg.Pipeline, sc.Publication)
	}
	var held *readerHold
	if rd, err := readerStatus(ctx, a); err == nil && rd.Progress != nil {
		for _, h := range rd.Progress.Held {
			if h.Table == table {
				held = &readerHold{pos: h.Position, since: h.Since}
			}
		}
	}
	id := workflows.TableWorkflowID(a.cfg.Pipeline, table)
	fmt.Fprintf(out, "table %s of pipeline %s, removed from the config:\n", table, a.cfg.Pipeline)
	fmt.Fprintf(out, "  forgotten: its %d staged batches%s (deleted), its workflow %s (terminated if running), its place in publication %s (dropped: %v), "+
		"and every change of it the slot still holds%s: the slot moves past them\n",
		len(refs), refsRange(refs), id, sc.Publication, r.InPublication, held.text())
	fmt.Fprintf(out, "  kept: its target in the %s sink with its rows and its committed position, as they are; "+
		"if you add the table back later, it stops with PositionGap (the changes made while it was removed are not replicated): run `sluice resync --table %s` then\n",
		a.cfg.Sink.Type, table)
	if !yes {
		return errors.New("refusing without --yes")
	}
	if r.Workflow == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if err := a.client.TerminateWorkflow(ctx, id, "", "forgotten by sluice remove"); err != nil {
			var notFound *serviceerror.NotFound
			if !errors.As(err, &notFound) {
				return fmt.Errorf("stopping workflow %s: %w", id, err)
			}
		}
		fmt.Fprintf(out, "workflow %s: terminated\n", id)
	}
	for _, ref := range refs {
		if err := store.Acknowledge(ctx, ref); err != nil {
			return fmt.Errorf("deleting the staged batches of table %s: %w", table, err)
		}
	}
	fmt.Fprintf(out, "deleted %d staged batches of table %s\n", len(refs), table)
	dropped, err := source.DropFromPublication(ctx, sc.DSN, sc.Publication, table)
	if err != nil {
		return err
	}
	if dropped {
		fmt.Fprintf(out, "dropped table %s from publication %s\n", table, sc.Publication)
	}
	return releaseHold(ctx, a, sc, wait, out)
}

// releaseHold ends the reader's run (reconfigure: the next run skips the table's changes, since
// it is no longer published) and waits until the slot is confirmed past the server's WAL
// position of now, which is past every change of the table, for at most wait.
func releaseHold(ctx context.Context, a *app, sc source.Config, wait time.Duration, out io.Writer) error {
	conns := &source.Pool{} // one connection for the reads of the wait, not one a second
	defer conns.Close()
	before, err := source.ReadSlotState(ctx, conns, sc.DSN, sc.Slot)
	if err != nil {
		return err
	}
	err = a.client.SignalWorkflow(ctx, workflows.SourceWorkflowID(a.cfg.Pipeline), "", workflows.SignalReconfigure, nil)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		fmt.Fprintf(out, "the pipeline's reader is not running: the slot moves past the table's changes when it runs again (sluice start)\n")
		return nil
	}
	if err != nil {
		return fmt.Errorf("asking the reader of pipeline %s to restart without the table: %w", a.cfg.Pipeline, err)
	}
	deadline := time.Now().Add(wait)
	for {
		s, err := source.ReadSlotState(ctx, conns, sc.DSN, sc.Slot)
		if err != nil {
			return err
		}
		if s.ConfirmedFlush >= before.Current {
			fmt.Fprintf(out, "replication slot %s confirmed up to %s (it was at %s): the table's hold is released\n", sc.Slot, s.ConfirmedFlush, before.ConfirmedFlush)
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(out, "replication slot %s is still confirmed only up to %s after %s: another table holds it (see `sluice status`)\n",
				sc.Slot, s.ConfirmedFlush, wait)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// readerHold is where the reader holds the slot for a removed table.
type readerHold struct {
	pos   batch.Position
	since time.Time
}

func (h *readerHold) text() string {
	if h == nil {
		return ""
	}
	s := " (the reader holds the slot at " + h.pos.String()
	if !h.since.IsZero() {
		s += ", a change committed " + h.since.UTC().Format(time.RFC3339)
	}
	return s + ")"
}

// refsRange is the positions staged batches span, for the removal's message.
func refsRange(refs []staging.BatchRef) string {
	if len(refs) == 0 {
		return ""
	}
	var bytes int64
	for _, r := range refs {
		bytes += r.Bytes
	}
	return fmt.Sprintf(" (%s, %s..%s)", bytesText(bytes), refs[0].Lo.Position, refs[len(refs)-1].Hi.Position)
}

// addRemoved adds a row for every table the config no longer lists (findRemoved), with its
// workflow's status.
func (rep *statusReport) addRemoved(ctx context.Context, a *app) error {
	removed, err := findRemoved(ctx, a)
	if err != nil {
		rep.RemovedError = err.Error()
		return nil
	}
	for _, r := range removed {
		row, err := tableStatusOf(ctx, a, r.Table)
		if err != nil {
			return err
		}
		row.Removed, row.Failed = true, false
		row.Status.Phase = workflows.StateRemoved
		row.Err = fmt.Sprintf("removed from the config (in the publication: %v): its staged batches and its changes hold the slot; "+
			"forget it with `sluice remove --table %s`, or add it back and run `sluice start`", r.InPublication, r.Table)
		rep.Tables = append(rep.Tables, row)
	}
	return nil
}

// assessRemoved sets what a removed table holds of the slot: its staged batches (from its
// committed position, as any table's) or the reader's hold at its first change not staged,
// whichever is older.
func (rep *statusReport) assessRemoved(r *tableRow) {
	if rep.Slot == nil || rep.Reader.Progress == nil {
		return
	}
	for _, h := range rep.Reader.Progress.Held {
		if h.Table.String() != r.Table {
			continue
		}
		r.HoldsBytes = max(r.HoldsBytes, int64(rep.Slot.Current)-int64(h.Position.LSN))
		r.HeldSince = h.Since
	}
}
