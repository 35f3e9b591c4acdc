package iceberg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// ArrowSchemaFunc maps a source table's schema to the Arrow schema of its batch records: the
// table's columns in order, then the context columns (__op, __pos, ...).
type ArrowSchemaFunc func(batch.Schema) (*arrow.Schema, error)

// Options are the sink's dependencies.
type Options struct {
	// Logger receives the sink's logs; nil means slog.Default().
	Logger *slog.Logger
	// ArrowSchema maps source schemas to batch records' Arrow schemas; nil means batch.ArrowSchema.
	// EnsureTable needs it to create and evolve tables before any record exists.
	ArrowSchema ArrowSchemaFunc
	// Maintenance is what Maintain (the scheduled maintenance) does; nil means
	// DefaultMaintenanceOptions() with snapshots expired after the configured
	// maintenance.expire_snapshots_after.
	Maintenance *MaintenanceOptions
	// Tables are the configured layouts (tables[].iceberg) by target; a target without one is
	// unpartitioned (or partitioned by partition_buckets), unsorted, with the default properties.
	Tables map[string]TableLayout
}

// Sink writes batches into Iceberg tables of one catalog. It is safe for concurrent use by
// different tables.
type Sink struct {
	cfg         Config
	cat         catalog.Catalog
	log         *slog.Logger
	arrowSchema ArrowSchemaFunc
	maintenance MaintenanceOptions
	tables      map[string]TableLayout
	keys        *keyIndex // key column bounds of the manifests read, for snapshot chunks

	// beforeCommit, when set by a test, runs between writing a batch's files and committing them.
	beforeCommit func(context.Context)
}

var (
	_ sinks.Sink       = (*Sink)(nil)
	_ sinks.Maintainer = (*Sink)(nil)
)

// New validates cfg (config.Iceberg.Validate, which fills in its defaults) and connects to its
// catalog. The caller closes the sink.
func New(ctx context.Context, cfg Config, opts Options) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.ArrowSchema == nil {
		opts.ArrowSchema = batch.ArrowSchema
	}
	cat, err := openCatalog(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	maint := DefaultMaintenanceOptions()
	maint.MaxSnapshotAge = cfg.Maintenance.ExpireSnapshotsAfter.D()
	maint.OrphanFileAge = cfg.Maintenance.RemoveOrphansAfter.D()
	if opts.Maintenance != nil {
		maint = *opts.Maintenance
	}
	return &Sink{cfg: cfg, cat: cat, log: log.With(logkey.Sink, "iceberg"), arrowSchema: opts.ArrowSchema, maintenance: maint, tables: opts.Tables,
		keys: newKeyIndex(keyIndexSize)}, nil
}

// Catalog returns the sink's catalog, for maintenance and tests.
func (s *Sink) Catalog() catalog.Catalog { return s.cat }

// Close releases the catalog's connections.
func (s *Sink) Close(context.Context) error {
	if c, ok := s.cat.(catalog.Closer); ok {
		if err := c.Close(); err != nil {
			return fmt.Errorf("closing the iceberg catalog: %w", err)
		}
	}
	return nil
}

// tableProps are the properties of every table the sink creates: format v2, merge-on-read for
// every engine that writes the table too, zstd data files at the configured level, and snapshot
// expiry left to Maintain.
func (s *Sink) tableProps() iceberg.Properties {
	return iceberg.Properties{
		table.PropertyFormatVersion:       "2",
		"write.delete.mode":               "merge-on-read",
		"write.update.mode":               "merge-on-read",
		"write.merge.mode":                "merge-on-read",
		table.WriteTargetFileSizeBytesKey: strconv.FormatInt(int64(s.cfg.TargetFileSizeBytes), 10),
		table.ParquetCompressionKey:       "zstd",
		table.ParquetCompressionLevelKey:  strconv.Itoa(s.cfg.CompressionLevel),
		"sluice.managed":                  "true",
	}
}

// EnsureTable creates the target table (and its namespace) when missing and adds new columns to
// an existing one; a column dropped from it by hand comes back only when it holds no rows
// (keepDropped). Changed types and a changed key are poison. Idempotent.
func (s *Sink) EnsureTable(ctx context.Context, spec sinks.TableSpec) error {
	ident, err := identifier(spec.Target)
	if err != nil {
		return err
	}
	rec, err := s.arrowSchema(spec.Schema)
	if err != nil {
		return sinks.Poisonf("table %s: mapping the schema to Arrow: %w", tableName(spec), err)
	}
	l, err := newLayout(spec, rec)
	if err != nil {
		return err
	}
	sh, err := s.shapeOf(spec, l)
	if err != nil {
		return err
	}
	tbl, err := s.cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		tbl, err = s.createTable(ctx, ident, l, sh)
	}
	if err != nil {
		return fmt.Errorf("loading iceberg table %s: %w", spec.Target, err)
	}
	if tbl, err = s.evolve(ctx, tbl, spec.Target, l); err != nil {
		return err
	}
	return s.applyShape(ctx, tbl, spec.Target, l, sh)
}

// createTable creates the table unpartitioned, with the sink's and the configured properties;
// applyShape partitions it next, leaving spec 0 unpartitioned for global equality deletes.
// A table created concurrently is loaded instead.
func (s *Sink) createTable(ctx context.Context, ident table.Identifier, l layout, sh shape) (*table.Table, error) {
	sc, err := l.icebergSchema()
	if err != nil {
		return nil, err
	}
	ns := catalog.NamespaceFromIdent(ident)
	if err := s.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("creating iceberg namespace %v: %w", ns, err)
	}
	props := s.tableProps()
	for k, v := range sh.props {
		props[k] = v
	}
	tbl, err := s.cat.CreateTable(ctx, ident, sc, catalog.WithProperties(props))
	switch {
	case errors.Is(err, catalog.ErrTableAlreadyExists):
		return s.cat.LoadTable(ctx, ident)
	case err != nil:
		return nil, fmt.Errorf("creating iceberg table %v: %w", ident, err)
	}
	s.log.InfoContext(ctx, "created iceberg table", logkey.Table, l.table, logkey.Target, ident)
	return tbl, nil
}

// evolve adds the layout's new columns to tbl and returns the table as committed; other
// differences are poison.
func (s *Sink) evolve(ctx context.Context, tbl *table.Table, target string, l layout) (*table.Table, error) {
	add, err := l.schemaDiff(target, tbl.Schema())
	if err == nil {
		add, err = s.keepDropped(ctx, tbl, l, target, add)
	}
	var promote []outCol
	if err == nil {
		promote, err = l.promotions(tbl.Schema())
	}
	if err != nil || len(add)+len(promote) == 0 {
		return tbl, err
	}
	tx := tbl.NewTransaction()
	upd := tx.UpdateSchema(true, false)
	for _, c := range promote {
		t, err := l.icebergType(c)
		if err != nil {
			return nil, err
		}
		upd = upd.UpdateColumn([]string{c.name}, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Val: t, Valid: true}})
	}
	for _, c := range add {
		t, err := l.icebergType(c)
		if err != nil {
			return nil, err
		}
		upd = upd.AddColumn([]string{c.name}, t, "", false, nil)
	}
	if err := upd.Commit(); err != nil {
		return nil, sinks.Poisonf("table %s: adding or widening columns of iceberg table %s: %w", l.table, target, err)
	}
	tbl, err = tx.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("committing new columns of iceberg table %s: %w", target, err)
	}
	for _, c := range add {
		s.log.InfoContext(ctx, "added column", logkey.Table, l.table, logkey.Target, target, logkey.Column, c.name)
	}
	for _, c := range promote {
		s.log.InfoContext(ctx, "widened column", logkey.Table, l.table, logkey.Target, target, logkey.Column, c.name, logkey.Type, c.field.Type.String())
	}
	return tbl, nil
}

// Position returns the committed position of the target table, read from the table itself.
func (s *Sink) Position(ctx context.Context, spec sinks.TableSpec) (batch.SourcePosition, bool, error) {
	ident, err := identifier(spec.Target)
	if err != nil {
		return batch.SourcePosition{}, false, err
	}
	tbl, err := s.cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return batch.SourcePosition{}, false, nil
	}
	if err != nil {
		return batch.SourcePosition{}, false, fmt.Errorf("loading iceberg table %s: %w", spec.Target, err)
	}
	return tablePosition(tbl)
}
