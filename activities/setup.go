package activities

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/activity"
	"golang.org/x/sync/errgroup"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/source"
)

// Setup holds the activities that prepare a pipeline: the slot and publication, and one running
// TableWorkflow per table.
type Setup struct {
	Tables  TableStarter
	Sources SourceConfigs
	Logger  *slog.Logger
	// Authority is the worker's config that every input is checked against; nil refuses all.
	Authority *Authority
	// Conns lends the short catalog reads (TableSchema) a pooled source connection; nil opens
	// one per read.
	Conns *source.Pool
}

// SetupInput describes a pipeline's source side.
type SetupInput struct {
	Pipeline    string `json:"pipeline"`
	Slot        string `json:"slot"`
	Publication string `json:"publication"`
	// Tables, when set, must be the worker's configured tables (checked); empty takes them
	// from the worker's config, which keeps every payload of the SourceWorkflow the same size
	// whatever the number of tables.
	Tables []TableConfig `json:"tables,omitempty"`
}

// SetupResult is the pipeline's source as the slot sees it.
type SetupResult struct {
	Source batch.SourceID `json:"source"`
	// Start is the slot's confirmed position: the reader resumes there.
	Start batch.SourcePosition `json:"start"`
	// Tables are the input's tables with their Source set, without columns; none when the
	// input listed none (the next activities take them from the worker's config too).
	Tables []TableConfig `json:"tables,omitempty"`
	// SlotSince is the LSN the slot was created at (0: unknown): the gap check's bound.
	SlotSince uint64 `json:"slot_since,omitempty"`
	// Joined holds the tables ("schema.name") that joined the publication after its creation,
	// each with the position it joined at: their gap check's bound when later (source.Info).
	Joined map[string]uint64 `json:"joined,omitempty"`
}

// SetupSource creates the slot and the publication when missing (idempotent), checks that the
// publication carries exactly the configured tables and that each table's schema can be read. A source
// that cannot serve the pipeline (preflight problems) is a non-retryable SourceSetup error that
// names every problem.
func (a *Setup) SetupSource(ctx context.Context, in SetupInput) (_ SetupResult, err error) {
	defer convert(&err)
	if err := a.Authority.CheckSource(in.Pipeline, in.Slot, in.Publication, in.Tables); err != nil {
		return SetupResult{}, err
	}
	tables := in.Tables
	if len(tables) == 0 {
		tables = a.Authority.configured(batch.SourceID{}, 0, nil)
	}
	cfg, err := sourceConfig(a.Sources, in.Pipeline, in.Slot, in.Publication, tables)
	if err != nil {
		return SetupResult{}, err
	}
	info, err := source.Setup(ctx, cfg, logOrDiscard(a.Logger))
	if err != nil {
		return SetupResult{}, sourceError("setting up the source of pipeline "+in.Pipeline, err)
	}
	out := SetupResult{
		Source:    info.ID,
		Start:     batch.SourcePosition{Source: info.ID, Position: batch.Position{LSN: info.ConfirmedLSN}},
		SlotSince: info.SlotSince,
		Joined:    info.Joined,
	}
	for i, t := range in.Tables {
		t.Spec.Schema = batch.Schema{Table: info.Schemas[i].Table}
		t.Source = &out.Source
		t.SlotSince = info.TableSince(t.Table())
		out.Tables = append(out.Tables, t)
	}
	return out, nil
}

// ensureWorkflowsAtOnce bounds the tables EnsureTableWorkflows starts at once: one at a time,
// 500 tables took two minutes on a busy server (two round trips each).
const ensureWorkflowsAtOnce = 16

// EnsureTableWorkflows starts the TableWorkflow of every table that has none running, so idle
// tables are backfilled too. Tables whose workflow failed stay stopped for the operator. It is
// idempotent, starts up to ensureWorkflowsAtOnce tables at once and heartbeats the number of
// tables done after each one.
func (a *Setup) EnsureTableWorkflows(ctx context.Context, tables []TableConfig) (err error) {
	defer convert(&err)
	for _, t := range tables {
		if err := a.Authority.checkTable(t, failure.NotConfigured); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ensureWorkflowsAtOnce)
	var done atomic.Int64
	for _, t := range tables {
		g.Go(func() error {
			if err := a.Tables.EnsureTableWorkflow(gctx, t); err != nil {
				return fmt.Errorf("ensuring workflow of table %s: %w", t.Table(), err)
			}
			activity.RecordHeartbeat(ctx, done.Add(1))
			return nil
		})
	}
	return g.Wait()
}

// EnsureConfiguredInput names the pipeline whose configured tables EnsureConfiguredTables
// starts, with what SetupSource found.
type EnsureConfiguredInput struct {
	Pipeline  string         `json:"pipeline"`
	Source    batch.SourceID `json:"source"`
	SlotSince uint64         `json:"slot_since,omitempty"`
	// Joined is SetupResult.Joined.
	Joined map[string]uint64 `json:"joined,omitempty"`
}

// EnsureConfiguredTables is EnsureTableWorkflows for every table of the worker's config: the
// SourceWorkflow calls it when its input lists no tables, so its payloads stay the same size
// whatever the number of tables.
func (a *Setup) EnsureConfiguredTables(ctx context.Context, in EnsureConfiguredInput) (err error) {
	defer convert(&err)
	if err := a.Authority.CheckSource(in.Pipeline, "", "", nil); err != nil {
		return err
	}
	return a.EnsureTableWorkflows(ctx, a.Authority.configured(in.Source, in.SlotSince, in.Joined))
}

// TableSchema reads a table's current schema from the source catalog. A TableWorkflow started by
// hand (signal-with-start from the Temporal CLI) has no columns in its input; its run asks here.
func (a *Setup) TableSchema(ctx context.Context, in TableConfig) (_ batch.Schema, err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in); err != nil {
		return batch.Schema{}, err
	}
	cfg, err := sourceConfig(a.Sources, in.Pipeline, "", "", []TableConfig{in})
	if err != nil {
		return batch.Schema{}, err
	}
	conn, err := a.Conns.Acquire(ctx, cfg.DSN)
	if err != nil {
		return batch.Schema{}, fmt.Errorf("connecting to the source of pipeline %s to read table %s: %w", in.Pipeline, in.Table(), err)
	}
	defer conn.Release(ctx)
	schema, err := source.DiscoverSchema(ctx, conn.Conn, cfg.Tables[0])
	if err != nil {
		return batch.Schema{}, sourceError("reading the schema of table "+in.Table().String(), err)
	}
	return schema, nil
}

// readSchemas fills in the columns of the tables that have none, from the source catalog over
// one connection. cfg.Tables are the tables' source settings (sourceConfig), in the same order.
func readSchemas(ctx context.Context, cfg source.Config, tables []TableConfig) error {
	var conn *pgx.Conn
	for i, t := range tables {
		if len(t.Spec.Schema.Columns) > 0 {
			continue
		}
		if conn == nil {
			c, err := pgx.Connect(ctx, cfg.DSN)
			if err != nil {
				return fmt.Errorf("connecting to the source of pipeline %s to read the tables' schemas: %w", t.Pipeline, err)
			}
			defer c.Close(context.WithoutCancel(ctx))
			conn = c
		}
		schema, err := source.DiscoverSchema(ctx, conn, cfg.Tables[i])
		if err != nil {
			return sourceError("reading the schema of table "+t.Table().String(), err)
		}
		tables[i].Spec.Schema = schema
	}
	return nil
}
