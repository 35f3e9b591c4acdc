package activities

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/sluicecdc/sluice/commit"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// SinkRef names a sink configured on the workers (commit.SinkRef).
type SinkRef = commit.SinkRef

// TableConfig is one table of a pipeline as activities and the TableWorkflow see it: the commit
// engine's commit.Table, one definition of the shape workflow inputs carry.
type TableConfig = commit.Table

// SinkProvider gives activities the sink a SinkRef names. The provider owns the sinks: it opens
// them once, shares them across activities (a Sink is safe for concurrent use by different
// tables) and closes them when the worker stops. Sink honours ctx and is safe for concurrent use.
type SinkProvider interface {
	Sink(ctx context.Context, ref SinkRef) (sinks.Sink, error)
}

// TableStopper is an optional capability of a TableStarter: Stop fails the table's running
// workflow with a non-retryable error of type errType and message msg, unless it backfilled
// from a snapshot other than epoch's (catalogwatch.Epoch) in its run; a table that does not run
// is left alone. Idempotent and safe for concurrent use.
type TableStopper interface {
	Stop(ctx context.Context, table TableConfig, errType, msg, epoch string) error
}

// TableStarter makes sure a table's workflow runs and delivers batch references to it. Package
// workflows implements it with signal-with-start on the table's deterministic workflow ID. Both
// methods are idempotent and safe for concurrent use.
type TableStarter interface {
	// EnsureTableWorkflow starts the table's workflow when it is not running. A table whose
	// last run failed (a poison batch) is left stopped: it is the operator's to resume. (Not
	// sinks.Sink's EnsureTable, which creates the table's target.)
	EnsureTableWorkflow(ctx context.Context, table TableConfig) error
	// SignalBatches delivers refs (in the order they were staged) to the table's workflow in
	// one signal, starting the workflow when it is not running (but not restarting a failed
	// one, whose next run reloads them from staging).
	SignalBatches(ctx context.Context, table TableConfig, refs []staging.BatchRef) error
	// Resync asks the table's workflow to discard its target and backfill it again (the
	// reader's answer to a TRUNCATE, the operator's to a lost staged batch), starting a new run
	// when none runs: a TRUNCATE of a failed table must not stall the reader of every table.
	Resync(ctx context.Context, table TableConfig) error
}

// SourceConfigs gives activities the source settings of a pipeline: the DSN stays in the
// workers' configuration, never in workflow inputs or history. The returned Config carries the
// pipeline's slot and publication, and its Tables carry the configured column lists and row
// filters (they too come from the workers' configuration only); sourceConfig sets the tables
// an activity works on.
type SourceConfigs func(pipeline string) (source.Config, error)

// sourceConfig returns the pipeline's source settings for the given tables (with the column
// lists and row filters the worker's configuration gives them), with the slot and publication
// of the workflow's input when it names them.
func sourceConfig(configs SourceConfigs, pipeline, slot, publication string, tables []TableConfig) (source.Config, error) {
	if configs == nil {
		return source.Config{}, failure.New(failure.SourceSetup, "this worker has no source configured", nil)
	}
	cfg, err := configs(pipeline)
	if err != nil {
		return source.Config{}, failure.New(failure.SourceSetup, fmt.Sprintf("pipeline %s: %v", pipeline, err), err)
	}
	if slot != "" {
		cfg.Slot = slot
	}
	if publication != "" {
		cfg.Publication = publication
	}
	configured := cfg.Tables
	cfg.Tables = nil
	for _, t := range tables {
		tc := source.TableConfig{Table: t.Table()}
		if i := slices.IndexFunc(configured, func(c source.TableConfig) bool { return c.Table == t.Table() }); i >= 0 {
			tc = configured[i]
		}
		tc.Key = t.Key
		cfg.Tables = append(cfg.Tables, tc)
	}
	return cfg, nil
}

// logOrDiscard returns l, or a logger that discards when l is nil.
func logOrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
