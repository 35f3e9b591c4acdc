package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/catalogwatch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/metrics"
	"github.com/sluicecdc/sluice/reader"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// Reader holds the pipeline's long-running reader activity.
type Reader struct {
	Staging *staging.Store
	Tables  TableStarter
	Sources SourceConfigs
	Logger  *slog.Logger
	// Compression of the staged batch files; empty means batch.DefaultCompression (LZ4).
	Compression batch.Compression
	// ListEvery is how often the reader lists the staging store to learn which batches were
	// acknowledged (which lets it confirm the slot further); 0 means 5 seconds.
	ListEvery time.Duration
	// Metrics records what the reader reads and what each table holds in staging; nil records
	// nothing.
	Metrics *metrics.Metrics
	// Authority is the worker's config that every input is checked against; nil refuses all.
	Authority *Authority
}

// ReadStreamInput says what to read and for how long.
type ReadStreamInput struct {
	Pipeline    string         `json:"pipeline"`
	Slot        string         `json:"slot"`
	Publication string         `json:"publication"`
	Source      batch.SourceID `json:"source"`
	// Tables, when set, must be the worker's configured tables (checked); empty takes them
	// from the worker's config (see SetupInput.Tables).
	Tables []TableConfig `json:"tables,omitempty"`
	// SlotSince is the slot's creation point (SetupResult.SlotSince), given to the tables the
	// reader starts when Tables is empty.
	SlotSince uint64 `json:"slot_since,omitempty"`
	// Joined is SetupResult.Joined, for the same tables.
	Joined map[string]uint64 `json:"joined,omitempty"`
	// RunFor bounds one activity run; the SourceWorkflow then continues as new.
	RunFor time.Duration `json:"run_for"`
	// Batch limits: a table's batch is cut at MaxRows rows, MaxBytes bytes or MaxWait after its
	// first row, whichever comes first.
	MaxRows  int           `json:"max_rows"`
	MaxBytes int64         `json:"max_bytes"`
	MaxWait  time.Duration `json:"max_wait"`
}

// ReadStreamResult reports one reader run.
type ReadStreamResult struct {
	Position  batch.SourcePosition `json:"position"`  // everything up to here is staged
	Confirmed batch.SourcePosition `json:"confirmed"` // the slot is confirmed up to here
	Batches   int64                `json:"batches"`
	Rows      int64                `json:"rows"`
	// Held are the tables in the publication but not in the config whose changes hold the slot
	// (removed from the config, waiting for `sluice remove`): `sluice status` shows them.
	Held []reader.HeldTable `json:"held,omitempty"`
}

// ReadStream decodes pgoutput from the pipeline's slot, splits changes per table, cuts batches,
// stages each and confirms the slot only up to what no table still holds: buffered changes and
// staged batches that their table has not committed and acknowledged (package reader does all
// of it). It heartbeats its position and returns after RunFor. Idle periods send keepalives so a
// quiet pipeline does not hold WAL. A TRUNCATE of a table asks that table to resync (discard and
// backfill again from a snapshot taken after the truncate), which is exact where replaying a
// truncate is not.
func (a *Reader) ReadStream(ctx context.Context, in ReadStreamInput) (_ ReadStreamResult, err error) {
	defer convert(&err)
	if err := a.Authority.CheckSource(in.Pipeline, in.Slot, in.Publication, in.Tables); err != nil {
		return ReadStreamResult{}, err
	}
	if len(in.Tables) == 0 {
		in.Tables = a.Authority.configured(in.Source, in.SlotSince, in.Joined)
	}
	cfg, err := sourceConfig(a.Sources, in.Pipeline, in.Slot, in.Publication, in.Tables)
	if err != nil {
		return ReadStreamResult{}, err
	}
	// Heartbeats from the start, through reading the schemas and opening the stream, however
	// long: a retried attempt has its predecessor's details, so activities.Heartbeats does not
	// heartbeat for it. It repeats the last progress (the previous attempt's, at first).
	var last ReadStreamResult
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &last)
	}
	beat := startBeat(ctx, last, beatInterval, sendHeartbeat[ReadStreamResult])
	defer beat.stop()
	defer a.Metrics.ReaderStopped(in.Pipeline)
	// SetupSource passes the tables without their columns (one result for every table would
	// outgrow a payload): read them here, on the reader's worker.
	in.Tables = slices.Clone(in.Tables)
	if err := readSchemas(ctx, cfg, in.Tables); err != nil {
		return ReadStreamResult{}, err
	}
	tables := tableSignals{starter: a.Tables, tables: make(map[batch.TableName]TableConfig, len(in.Tables))}
	onRecreate := make(map[batch.TableName]string, len(cfg.Tables))
	for _, t := range cfg.Tables {
		onRecreate[t.Table] = t.OnRecreate
	}
	schemas := make([]batch.Schema, 0, len(in.Tables))
	for _, t := range in.Tables {
		tables.tables[t.Table()] = t
		schemas = append(schemas, t.Spec.Schema)
	}
	onDrop := map[batch.TableName]string{}
	for _, t := range cfg.Tables {
		onDrop[t.Table] = t.OnDropColumn
	}
	res, err := reader.Read(ctx, reader.Config{
		Pipeline:     in.Pipeline,
		Source:       in.Source,
		SlotSince:    in.SlotSince,
		Schemas:      schemas,
		Limits:       batch.Limits{MaxRows: in.MaxRows, MaxBytes: int(in.MaxBytes), MaxWait: in.MaxWait},
		RunFor:       in.RunFor,
		ListEvery:    a.ListEvery,
		Compression:  a.Compression,
		Publication:  cfg.Publication,
		OnRecreate:   onRecreate,
		OnDropColumn: onDrop,
	}, reader.Deps{
		Store: a.Staging,
		Marks: a.Staging,
		// The schema each table followed, so a change made while stopped is seen.
		SchemaRecords: a.Staging,
		// The identity each table's sink corresponds to, so a table dropped and re-created, or
		// a publication edited by hand, is seen.
		Identities: a.Staging,
		Republish: func(ctx context.Context) ([]batch.TableName, error) {
			return source.Republish(ctx, cfg, logOrDiscard(a.Logger).With(logkey.Pipeline, in.Pipeline))
		},
		Tables:  tables,
		Metrics: a.Metrics,
		OpenFetcher: func(ctx context.Context) (reader.Fetcher, error) {
			f, err := source.OpenFetcher(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return f, nil
		},
		NewStream: func(opts source.StreamOptions) (reader.Stream, error) {
			s, err := source.NewStream(cfg, opts)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		Published: func(ctx context.Context, table batch.TableName) (bool, error) {
			pub, err := source.ReadPublished(ctx, cfg.DSN, cfg.Publication)
			return pub.Has(table), err
		},
		Heartbeat: func(ctx context.Context, progress reader.Result) {
			beat.record(ctx, readStreamResult(progress))
		},
		Logger:       logOrDiscard(a.Logger).With(logkey.Pipeline, in.Pipeline, logkey.Slot, cfg.Slot),
		CatalogWatch: catalogWatcher(a.Staging, in.Pipeline, cfg, logOrDiscard(a.Logger)),
	})
	return readStreamResult(res), readerError(err)
}

// catalogWatcher watches the storage of the pipeline's tables and the partitions of those that
// are partitioned, with each table's tables[].on_rewrite, on_partition_change and row filter;
// nil without a staging store.
func catalogWatcher(store *staging.Store, pipeline string, cfg source.Config, log *slog.Logger) reader.CatalogWatch {
	if store == nil {
		return nil
	}
	w := &catalogwatch.Watcher{Pipeline: pipeline, Store: store, Logger: log.With(logkey.Pipeline, pipeline, logkey.Module, "catalogwatch")}
	for _, t := range cfg.Tables {
		w.Tables = append(w.Tables, catalogwatch.Table{Name: t.Table, Policy: catalogwatch.Policy(t.OnPartitionChange),
			OnRewrite: catalogwatch.Policy(t.OnRewrite), Where: t.Where})
	}
	return w
}

// readStreamResult is the activity's form of a reader run's result.
func readStreamResult(r reader.Result) ReadStreamResult {
	return ReadStreamResult{Position: r.Position, Confirmed: r.Confirmed, Batches: r.Batches, Rows: r.Rows, Held: slices.Clone(r.Held)}
}

// readerError gives an error of reader.Read its class: the reader's own marks (SourceSetup, a
// PoisonBatch of a batch that cannot be converted) keep their type, also when they arrive
// wrapped in the stream's error, since reading again meets the same changes; a lost slot is
// SlotLost and another failure the source marked permanent is SourceSetup (its permanence is
// the source's to say); the rest stays transient.
func readerError(err error) error {
	if err == nil || failure.TypeOf(err) != "" {
		return err
	}
	if lost, ok := errors.AsType[*source.SlotLostError](err); ok {
		return failure.New(failure.SlotLost, err.Error(), lost)
	}
	if failure.Is(err) {
		return failure.New(failure.SourceSetup, err.Error(), err)
	}
	return err
}

// tableSignals are the reader's Tables: the pipeline's TableConfigs, each with the schema the
// reader follows now, delivered through the TableStarter.
type tableSignals struct {
	starter TableStarter
	tables  map[batch.TableName]TableConfig
}

// config returns the table's config with the reader's current schema.
func (s tableSignals) config(schema batch.Schema) TableConfig {
	t := s.tables[schema.Table]
	t.Spec.Schema = schema
	return t
}

// SignalBatches delivers staged batches to their table's workflow.
func (s tableSignals) SignalBatches(ctx context.Context, schema batch.Schema, refs []staging.BatchRef) error {
	return s.starter.SignalBatches(ctx, s.config(schema), refs)
}

// Stop fails the table's workflow (reader.TableStopper), when the starter can.
func (s tableSignals) Stop(ctx context.Context, schema batch.Schema, errType, msg, epoch string) error {
	stopper, ok := s.starter.(TableStopper)
	if !ok {
		return fmt.Errorf("table %s must stop (%s), but this worker's table starter cannot stop a table", schema.Table, msg)
	}
	return stopper.Stop(ctx, s.config(schema), errType, msg, epoch)
}

// Resync asks the table's workflow to backfill again.
func (s tableSignals) Resync(ctx context.Context, schema batch.Schema) error {
	return s.starter.Resync(ctx, s.config(schema))
}
