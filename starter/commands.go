package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/control"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/workflows"
)

func checkCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Preflight the source (wal_level, privileges, tables, keys, replica identity, column types), Temporal's search attributes and a plugin sink's handshake",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(a.configPath)
			if err != nil {
				return err
			}
			sc, _ := pipeline.SourceConfigs(cfg)(cfg.Pipeline)
			modern, known, err := pipeline.ClickHouseModern(cmd.Context(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "note: could not reach ClickHouse to learn the layout of new targets (%v); their key columns are checked when the worker creates them\n", err)
			}
			if cfg.Sink.Type != config.SinkClickHouse || known {
				sc.CheckTable = pipeline.CheckTable(cfg, modern)
			}
			problems, err := source.Check(cmd.Context(), sc)
			if err != nil {
				return fmt.Errorf("could not check the source: %w", err)
			}
			capacity, err := source.ReadReplicationCapacity(cmd.Context(), sc.DSN, sc.Slot)
			if err != nil {
				return fmt.Errorf("could not check the source: %w", err)
			}
			problems = append(problems, capacity.BackfillProblems(cfg.Source.MaxParallelBackfills)...)
			problems = append(problems, checkSearchAttributes(cmd.Context(), a, cmd.OutOrStdout())...)
			problems = append(problems, checkPlugin(cmd.Context(), cfg, cmd.OutOrStdout())...)
			slot, err := source.ReadSlotState(cmd.Context(), nil, sc.DSN, sc.Slot)
			if err != nil {
				return fmt.Errorf("could not check the source: %w", err)
			}
			printWALGuard(cmd.OutOrStdout(), slot)
			if len(problems) == 0 {
				backfills := cfg.Source.MaxParallelBackfills
				if backfills == 0 {
					backfills = capacity.DefaultParallelBackfills()
				}
				fmt.Fprintf(cmd.OutOrStdout(), "source ready for pipeline %s (%d tables, up to %d backfills at once per worker)\n",
					cfg.Pipeline, len(cfg.Tables), backfills)
				return nil
			}
			for _, p := range problems {
				fmt.Fprintln(cmd.OutOrStdout(), "problem:", p)
			}
			return fmt.Errorf("%d problems found", len(problems))
		},
	}
}

func inputCmd(a *app) *cobra.Command {
	var table string
	cmd := &cobra.Command{
		Use:   "input",
		Short: "Print the SourceWorkflow input (JSON) that `temporal workflow start --input` takes for this pipeline, or with --table a TableWorkflow's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(a.configPath)
			if err != nil {
				return err
			}
			var in any = pipeline.SourceInput(cfg)
			if table != "" {
				tables, err := selectTables(cfg, table)
				if err != nil {
					return err
				}
				// What resume and resync send, less the schema, which a new run reads from the source.
				in = workflows.TableInput{TableConfig: tables[0], Options: pipeline.TableOptions(cfg)}
			}
			out, err := json.Marshal(in)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(out))
			return nil
		},
	}
	cmd.Flags().StringVar(&table, "table", "", "print the TableWorkflow input of this table (schema.table or its target), for `temporal workflow signal-with-start`")
	return cmd
}

func startCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "start",
		Short: "Start the pipeline's SourceWorkflow (it starts one TableWorkflow per table), or make a running one apply its workers' config",
		Args:  cobra.NoArgs,
		RunE: withClient(a, func(cmd *cobra.Command, _ []string) error {
			in := pipeline.SourceInput(a.cfg)
			running := sourceRunning(cmd.Context(), a)
			// A running pipeline gets reconfigure: its next run adds the tables the workers'
			// config gained to the publication and starts them.
			run, err := control.StartSource(cmd.Context(), a.client, a.cfg.Temporal.TaskQueue, in, pipeline.Authority(a.cfg).Tables)
			if err != nil {
				return fmt.Errorf("starting pipeline %s: %w", a.cfg.Pipeline, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "pipeline %s running: workflow %s (run %s)\n", a.cfg.Pipeline, run.GetID(), run.GetRunID())
			if running {
				fmt.Fprintf(out, "  it was running: its reader restarts with the workers' config (restart the workers with this file first); tables added to it join the publication and backfill\n")
			}
			for _, t := range a.cfg.Tables {
				name, _ := t.SourceName()
				fmt.Fprintf(out, "  table %s -> %s: workflow %s\n", name, t.Target, workflows.TableWorkflowID(a.cfg.Pipeline, name))
			}
			if err := stopRemoved(cmd.Context(), a, out); err != nil {
				fmt.Fprintf(out, "  could not look for tables removed from the config (`sluice status` lists them): %v\n", err)
			}
			fmt.Fprintf(out, "watch it with: sluice status --config %s --watch\n", a.configPath)
			return nil
		}),
	}
}

// sourceRunning reports whether the pipeline's SourceWorkflow runs (false when it cannot tell).
func sourceRunning(ctx context.Context, a *app) bool {
	desc, err := a.client.DescribeWorkflowExecution(ctx, workflows.SourceWorkflowID(a.cfg.Pipeline), "")
	return err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// selectTables returns the configured tables, or the one --table names.
func selectTables(cfg *config.Config, table string) ([]activities.TableConfig, error) {
	var out []activities.TableConfig
	for _, t := range cfg.Tables {
		name, _ := t.SourceName()
		if table == "" || name.String() == table || t.Target == table {
			out = append(out, pipeline.TableConfig(cfg, t))
		}
	}
	if len(out) == 0 {
		var names []string
		for _, t := range cfg.Tables {
			names = append(names, t.Source)
		}
		return nil, fmt.Errorf("--table %s: pipeline %s has no such table (tables: %s)", table, cfg.Pipeline, strings.Join(names, ", "))
	}
	return out, nil
}

func tableCommand(a *app, use, short string, required bool, do func(cmd *cobra.Command, t control.Tables, tc activities.TableConfig) error) *cobra.Command {
	var table string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: withClient(a, func(cmd *cobra.Command, _ []string) error {
			tables, err := selectTables(a.cfg, table)
			if err != nil {
				return err
			}
			t := control.Tables{Client: a.client, TaskQueue: a.cfg.Temporal.TaskQueue, Options: pipeline.TableOptions(a.cfg)}
			var errs []error
			for _, tc := range tables {
				if err := do(cmd, t, tc); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", tc.Table(), strings.Fields(use)[0]+" sent")
			}
			return errors.Join(errs...)
		}),
	}
	cmd.Flags().StringVar(&table, "table", "", "one table (schema.table or its target); default every table")
	if required {
		_ = cmd.MarkFlagRequired("table")
	}
	return cmd
}

func pauseCmd(a *app) *cobra.Command {
	return tableCommand(a, "pause", "Stop committing after the current batch (batches keep being staged)", false,
		func(cmd *cobra.Command, t control.Tables, tc activities.TableConfig) error {
			return t.Pause(cmd.Context(), tc)
		})
}

func resumeCmd(a *app) *cobra.Command {
	return tableCommand(a, "resume", "Resume a paused table, or restart a failed one from its committed position (fix the cause first)", false,
		func(cmd *cobra.Command, t control.Tables, tc activities.TableConfig) error {
			tc, err := withCurrentSchema(cmd.Context(), a.cfg, tc)
			if err != nil {
				return err
			}
			return t.Resume(cmd.Context(), tc)
		})
}

// withCurrentSchema returns tc with the table's current schema read from the source. Resume and
// resync may start a new run of a failed or stopped table, and a new run needs the schema (the
// SourceWorkflow passes it to the runs it starts).
func withCurrentSchema(ctx context.Context, cfg *config.Config, tc activities.TableConfig) (activities.TableConfig, error) {
	sc, err := pipeline.SourceConfigs(cfg)(cfg.Pipeline)
	if err != nil {
		return tc, err
	}
	dsn := sc.DSN
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return tc, fmt.Errorf("connecting to the source to read the schema of table %s (source.dsn): %w", tc.Table(), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st := source.TableConfig{Table: tc.Table()}
	for _, c := range pipeline.SourceTables(cfg) {
		if c.Table == tc.Table() {
			st = c // its column list decides the schema's columns
		}
	}
	st.Key = tc.Key
	schema, err := source.DiscoverSchema(ctx, conn, st)
	if err != nil {
		return tc, fmt.Errorf("reading the schema of table %s: %w", tc.Table(), err)
	}
	tc.Spec.Schema = schema
	// The slot's creation point (or the table's joining the publication, if later), so that a
	// resumed table whose position predates it stops with PositionGap rather than skipping the
	// changes in between.
	if tc.SlotSince, err = source.TableSince(ctx, dsn, sc.Publication, sc.Slot, tc.Table()); err != nil {
		return tc, fmt.Errorf("reading the record of replication slot %s: %w", sc.Slot, err)
	}
	return tc, nil
}

func resyncCmd(a *app) *cobra.Command {
	return tableCommand(a, "resync", "Discard the table's target and backfill it again from a new snapshot (a running, paused or failed table)", true,
		func(cmd *cobra.Command, t control.Tables, tc activities.TableConfig) error {
			tc, err := withCurrentSchema(cmd.Context(), a.cfg, tc)
			if err != nil {
				return err
			}
			tc.SlotSince = 0 // the resync discards the position a PositionGap is about
			return t.Resync(cmd.Context(), tc)
		})
}

func stopCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the pipeline's workflows; positions stay in the sinks, so start resumes where it stopped",
		Args:  cobra.NoArgs,
		RunE: withClient(a, func(cmd *cobra.Command, _ []string) error {
			return stopWorkflows(cmd, a, "stopped by sluice stop")
		}),
	}
}

// stopWorkflows terminates the pipeline's SourceWorkflow and every table's workflow.
func stopWorkflows(cmd *cobra.Command, a *app, reason string) error {
	ids := []string{workflows.SourceWorkflowID(a.cfg.Pipeline)}
	for _, t := range a.cfg.Tables {
		name, _ := t.SourceName()
		ids = append(ids, workflows.TableWorkflowID(a.cfg.Pipeline, name))
	}
	var errs []error
	for _, id := range ids {
		err := a.client.TerminateWorkflow(cmd.Context(), id, "", reason)
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
			fmt.Fprintf(cmd.OutOrStdout(), "%s: not running\n", id)
		case err != nil:
			errs = append(errs, fmt.Errorf("stopping %s: %w", id, err))
		default:
			fmt.Fprintf(cmd.OutOrStdout(), "%s: stopped\n", id)
		}
	}
	return errors.Join(errs...)
}
