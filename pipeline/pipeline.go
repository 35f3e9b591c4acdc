// Package pipeline turns one validated pipeline config into what the worker and the starter
// need: the source settings the activities read (credentials stay on the workers), the sink the
// activities write to, and the plain-JSON SourceWorkflow input that starts the pipeline (the same
// input `temporal workflow start` takes).
package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/clickhouse"
	"github.com/sluicecdc/sluice/sinks/couchbase"
	"github.com/sluicecdc/sluice/sinks/iceberg"
	"github.com/sluicecdc/sluice/sinks/plugin"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/workflows"
)

// SourceInput is the SourceWorkflow input of cfg: names and batch limits, no secrets and no
// tables (the workers' config holds them).
func SourceInput(cfg *config.Config) workflows.SourceInput {
	in := workflows.SourceInput{
		Pipeline:    cfg.Pipeline,
		Slot:        cfg.Source.Slot,
		Publication: cfg.Source.Publication,
		MaxRows:     cfg.Batch.MaxRows,
		MaxBytes:    int64(cfg.Batch.MaxBytes),
		MaxWait:     workflows.Duration(cfg.Batch.MaxWait.D()),
	}
	return in // the tables stay in the workers' config (SourceInput.Tables)
}

// TableConfig is one configured table as the workflows and activities see it. Its schema is
// filled from the source catalog by the SetupSource activity.
func TableConfig(cfg *config.Config, t config.Table) activities.TableConfig {
	name, _ := t.SourceName()
	spec := sinks.TableSpec{Target: t.Target, Schema: batch.Schema{Table: name}, Metadata: slices.Clone(t.Metadata)}
	return activities.TableConfig{Pipeline: cfg.Pipeline, Spec: spec, Sink: SinkRef(cfg), Key: t.KeyColumns()}
}

// SinkRef names the pipeline's sink in workflow inputs: its type.
func SinkRef(cfg *config.Config) activities.SinkRef { return activities.SinkRef{Name: cfg.Sink.Type} }

// TableOptions are the TableWorkflow options of cfg. A grouped commit reads up to an eighth of
// batch.max_bytes of staged files, and a backfill joins chunks into sink writes of up to an
// eighth of it: at the whole of it (64 MiB) the joined copies doubled the records in memory
// and the worker met its soft memory limit (ClickHouse backfill at half the speed, 640 MiB
// peak; docs/benchmarks.md). An Iceberg sink's tables are maintained
// (MaintainTable) every sink.iceberg.maintenance.compact_every_commits commits; -1 turns that off.
func TableOptions(cfg *config.Config) workflows.TableOptions {
	o := workflows.TableOptions{SnapshotChunkRows: cfg.Source.SnapshotChunkRows, SnapshotApplyBytes: int64(cfg.Batch.MaxBytes) / 8,
		SnapshotChunkBytes: int64(cfg.Source.SnapshotChunkBytes), SnapshotParallelism: cfg.Source.SnapshotParallelism}
	o.CommitGroupBytes = int64(cfg.Batch.MaxBytes) / 8
	if cfg.Sink.Type == config.SinkIceberg && cfg.Sink.Iceberg != nil {
		switch n := cfg.Sink.Iceberg.Maintenance.CompactEveryCommits; {
		case n > 0:
			o.MaintainEveryCommits = n
		case n == 0:
			o.MaintainEveryCommits = config.DefaultCompactEveryCommits
		}
	}
	return o
}

// Authority is cfg as the judge of activity inputs: its pipeline, slot, publication, sink and
// tables are the only ones a worker with cfg acts on.
func Authority(cfg *config.Config) *activities.Authority {
	a := &activities.Authority{Pipeline: cfg.Pipeline, Slot: cfg.Source.Slot, Publication: cfg.Source.Publication, Sink: SinkRef(cfg)}
	for _, t := range cfg.Tables {
		a.Tables = append(a.Tables, TableConfig(cfg, t))
	}
	return a
}

// SourceConfigs serves the source settings of cfg's pipeline to the activities.
func SourceConfigs(cfg *config.Config) activities.SourceConfigs {
	return func(pipeline string) (source.Config, error) {
		if pipeline != cfg.Pipeline {
			return source.Config{}, fmt.Errorf("this worker serves pipeline %q, not %q: start a worker with that pipeline's config", cfg.Pipeline, pipeline)
		}
		return source.Config{Pipeline: cfg.Pipeline, DSN: cfg.Source.DSN, Slot: cfg.Source.Slot, Publication: cfg.Source.Publication, Tables: SourceTables(cfg)}, nil
	}
}

// SourceTables are cfg's tables as the source sees them: name, key, column list and row filter,
// every column named as Postgres stores it (tables[].key is SQL syntax: unquoted names fold).
func SourceTables(cfg *config.Config) []source.TableConfig {
	out := make([]source.TableConfig, 0, len(cfg.Tables))
	for _, t := range cfg.Tables {
		name, _ := t.SourceName()
		out = append(out, source.TableConfig{Table: name, Key: t.KeyColumns(),
			Columns: t.IncludedColumns(), ExcludeColumns: t.ExcludedColumns(), Where: t.Where,
			OnPartitionChange: t.OnPartitionChange, OnRecreate: t.OnRecreate, OnDropColumn: t.OnDropColumn, OnRewrite: t.OnRewrite})
	}
	return out
}

// Sinks opens the pipeline's sink on first use and shares it; it implements
// activities.SinkProvider. Close closes it.
type Sinks struct {
	cfg *config.Config
	log *slog.Logger

	mu   sync.Mutex
	sink sinks.Sink
}

// NewSinks returns the sink provider of cfg.
func NewSinks(cfg *config.Config, log *slog.Logger) *Sinks { return &Sinks{cfg: cfg, log: log} }

// Sink returns the sink ref names, opening it on first use.
func (s *Sinks) Sink(ctx context.Context, ref activities.SinkRef) (sinks.Sink, error) {
	if ref.Name != s.cfg.Sink.Type {
		return nil, fmt.Errorf("this worker's sink is %q, the workflow asks for %q: start a worker with that pipeline's config", s.cfg.Sink.Type, ref.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sink != nil {
		return s.sink, nil
	}
	sink, err := Open(ctx, s.cfg, s.log)
	if err != nil {
		return nil, err
	}
	s.sink = sink
	return sink, nil
}

// Close closes the sink if it was opened.
func (s *Sinks) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sink == nil {
		return nil
	}
	err := s.sink.Close(ctx)
	s.sink = nil
	return err
}

// IcebergTables are the configured Iceberg layouts (tables[].iceberg) by target.
func IcebergTables(cfg *config.Config) map[string]iceberg.TableLayout {
	out := map[string]iceberg.TableLayout{}
	for _, t := range cfg.Tables {
		if t.Iceberg != nil {
			out[t.Target] = *t.Iceberg
		}
	}
	return out
}

// CheckTable is the destination's check of a table's layout for `sluice check`
// (source.Config.CheckTable): an Iceberg target's partition_by and sort_by against the schema
// read from the source; a ClickHouse target's columns and key on the layout new targets get
// (clickhouseModern: the server's, see ClickHouseModern), which for the compatible layout
// refuses a timestamp key. Nil for sinks that have nothing to check.
func CheckTable(cfg *config.Config, clickhouseModern bool) func(batch.Schema) error {
	if cfg.Sink.Type == config.SinkClickHouse && cfg.Sink.ClickHouse != nil {
		return func(s batch.Schema) error {
			for _, t := range cfg.Tables {
				if name, _ := t.SourceName(); name == s.Table {
					spec := TableConfig(cfg, t).Spec
					spec.Schema = s
					return clickhouse.CheckLayout(spec, cfg.Sink.ClickHouse.Database, clickhouseModern)
				}
			}
			return nil
		}
	}
	if cfg.Sink.Type != config.SinkIceberg || cfg.Sink.Iceberg == nil {
		return nil
	}
	return func(s batch.Schema) error {
		for _, t := range cfg.Tables {
			if name, _ := t.SourceName(); name != s.Table {
				continue
			}
			spec := TableConfig(cfg, t).Spec
			spec.Schema = s
			var layout iceberg.TableLayout
			if t.Iceberg != nil {
				layout = *t.Iceberg
			}
			return iceberg.CheckLayout(spec, layout, cfg.Sink.Iceberg.PartitionBuckets)
		}
		return nil
	}
}

// ClickHouseModern reports whether new targets of cfg's ClickHouse sink get the modern layout:
// sink.clickhouse.schema when it names one, else the server's version decides (the sink is
// opened to read it). known is false when the server cannot be reached; err says why.
func ClickHouseModern(ctx context.Context, cfg *config.Config, log *slog.Logger) (modern, known bool, err error) {
	ch := cfg.Sink.ClickHouse
	switch {
	case cfg.Sink.Type != config.SinkClickHouse || ch == nil:
		return false, false, nil
	case ch.Schema == config.SchemaModern:
		return true, true, nil
	case ch.Schema == config.SchemaCompatible:
		return false, true, nil
	}
	s, err := clickhouse.New(ctx, *ch, log)
	if err != nil {
		return false, false, err
	}
	defer s.Close(context.WithoutCancel(ctx))
	return s.Modern(), true, nil
}

// Open opens the sink cfg configures, handing it its section of the config as it is.
func Open(ctx context.Context, cfg *config.Config, log *slog.Logger) (sinks.Sink, error) {
	switch {
	case cfg.Sink.Type == config.SinkIceberg && cfg.Sink.Iceberg != nil:
		s, err := iceberg.New(ctx, *cfg.Sink.Iceberg, iceberg.Options{Logger: log, Tables: IcebergTables(cfg)})
		if err != nil {
			return nil, fmt.Errorf("opening the iceberg sink: %w", err)
		}
		return s, nil
	case cfg.Sink.Type == config.SinkClickHouse && cfg.Sink.ClickHouse != nil:
		s, err := clickhouse.New(ctx, *cfg.Sink.ClickHouse, log)
		if err != nil {
			return nil, fmt.Errorf("opening the clickhouse sink: %w", err)
		}
		return s, nil
	case cfg.Sink.Type == config.SinkCouchbase && cfg.Sink.Couchbase != nil:
		s, err := couchbase.New(ctx, *cfg.Sink.Couchbase, couchbase.Options{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("opening the couchbase sink: %w", err)
		}
		return s, nil
	case cfg.Sink.Type == config.SinkPlugin && cfg.Sink.Plugin != nil:
		c, err := plugin.Open(ctx, *cfg.Sink.Plugin)
		if err != nil {
			return nil, fmt.Errorf("opening the plugin sink: %w", err)
		}
		return wrapPluginPosition(ctx, cfg, c, log)
	}
	return nil, fmt.Errorf("sink.type %q: this build has no %s sink; use iceberg, clickhouse, couchbase or plugin",
		cfg.Sink.Type, cfg.Sink.Type)
}
