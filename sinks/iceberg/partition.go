package iceberg

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// TableLayout is the configured Iceberg layout of one target (tables[].iceberg).
type TableLayout = config.TableIceberg

// shape is what the configuration asks of one table's layout, resolved against its schema.
type shape struct {
	partition []config.PartitionField
	sort      []config.SortField
	props     iceberg.Properties
}

// shapeOf returns the layout configured for spec's target (shapeFor).
func (s *Sink) shapeOf(spec sinks.TableSpec, l layout) (shape, error) {
	return shapeFor(s.tables[spec.Target], s.cfg.PartitionBuckets, l)
}

// shapeFor is the layout tl asks for: its partition fields, or partitionBuckets on the first key
// column when it partitions nothing.
func shapeFor(tl TableLayout, partitionBuckets int, l layout) (shape, error) {
	var sh shape
	var err error
	if sh.partition, err = tl.PartitionFields(); err != nil {
		return shape{}, sinks.Poisonf("table %s: tables[].iceberg.partition_by: %w", l.table, err)
	}
	if sh.sort, err = tl.SortFields(); err != nil {
		return shape{}, sinks.Poisonf("table %s: tables[].iceberg.sort_by: %w", l.table, err)
	}
	if len(sh.partition) == 0 && partitionBuckets > 0 {
		sh.partition = []config.PartitionField{{Transform: config.TransformBucket, Param: partitionBuckets, Column: l.keyCols()[0].name}}
	}
	if len(tl.Properties) > 0 {
		sh.props = iceberg.Properties{}
		for _, p := range tl.Properties {
			sh.props[p.Key] = p.Value
		}
	}
	return sh, nil
}

// CheckLayout checks, without a catalog, what EnsureTable checks of a table's layout before it
// creates the table: that the partition and sort columns are columns of spec's table and that
// their transforms suit their types. sluice check calls it with the schema read from the source.
func CheckLayout(spec sinks.TableSpec, tl TableLayout, partitionBuckets int) error {
	rec, err := batch.ArrowSchema(spec.Schema)
	if err != nil {
		return err
	}
	l, err := newLayout(spec, rec)
	if err != nil {
		return err
	}
	sc, err := l.icebergSchema()
	if err != nil {
		return err
	}
	sh, err := shapeFor(tl, partitionBuckets, l)
	if err != nil {
		return err
	}
	for _, f := range sh.partition {
		if _, _, err := resolveTransform(l.table, sc, f, "partition_by"); err != nil {
			return err
		}
	}
	_, err = sortOrder(l.table, sc, sh.sort)
	return err
}

// resolveTransform finds f's column in sc and checks that its transform applies to the column's
// type; errors are poison naming the table and the column.
func resolveTransform(tbl string, sc *iceberg.Schema, f config.PartitionField, key string) (iceberg.NestedField, iceberg.Transform, error) {
	col, ok := sc.FindFieldByName(f.Column)
	if !ok {
		return iceberg.NestedField{}, nil, sinks.Poisonf("table %s: tables[].iceberg.%s %s: column %s is not a column of the table "+
			"(replicated columns: %s); name one of them", tbl, key, f, f.Column, strings.Join(columnNames(sc), ", "))
	}
	tr, err := iceberg.ParseTransform(f.IcebergTransform())
	if err != nil {
		return iceberg.NestedField{}, nil, sinks.Poisonf("table %s: tables[].iceberg.%s %s: %w", tbl, key, f, err)
	}
	if !tr.CanTransform(col.Type) {
		return iceberg.NestedField{}, nil, sinks.Poisonf("table %s: tables[].iceberg.%s %s: column %s is %s, which %s cannot take "+
			"(year, month, day need a date or timestamp, hour a timestamp, truncate an integer, decimal, string or binary); "+
			"choose another transform or column", tbl, key, f, f.Column, col.Type, f.Transform)
	}
	return col, tr, nil
}

func columnNames(sc *iceberg.Schema) []string {
	var out []string
	for _, f := range sc.Fields() {
		out = append(out, f.Name)
	}
	return out
}

// partitionFieldName is the name of a partition field as Iceberg's engines name them: the column
// for identity, column_bucket, column_trunc, column_day...
func partitionFieldName(f config.PartitionField) string {
	switch f.Transform {
	case config.TransformIdentity:
		return f.Column
	case config.TransformTruncate:
		return f.Column + "_trunc"
	}
	return f.Column + "_" + f.Transform
}

// sameSpec reports whether spec partitions by exactly fields, in order.
func sameSpec(spec iceberg.PartitionSpec, sc *iceberg.Schema, fields []config.PartitionField) bool {
	if spec.NumFields() != len(fields) {
		return false
	}
	for i, f := range fields {
		pf := spec.Field(i)
		col, ok := sc.FindFieldByName(f.Column)
		if !ok || pf.SourceID() != col.ID || pf.Transform.String() != f.IcebergTransform() {
			return false
		}
	}
	return true
}

// applyShape gives tbl the configured partition spec, sort order and properties. Tables are
// created unpartitioned and then partitioned, so that spec 0 is unpartitioned: equality deletes
// written in it apply to every partition (see writeDeletes). A table that already holds data
// keeps its partition spec; a configuration that asks for another is poison, not rewritten.
// Idempotent: a table that matches commits nothing.
func (s *Sink) applyShape(ctx context.Context, tbl *table.Table, target string, l layout, sh shape) error {
	sc := tbl.Schema()
	for _, f := range sh.partition {
		if _, _, err := resolveTransform(l.table, sc, f, "partition_by"); err != nil {
			return err
		}
	}
	order, err := sortOrder(l.table, sc, sh.sort)
	if err != nil {
		return err
	}
	tx := tbl.NewTransaction()
	changed := false
	if !sameSpec(tbl.Spec(), sc, sh.partition) {
		if tbl.CurrentSnapshot() != nil {
			return sinks.Poisonf("table %s: Iceberg table %s is partitioned by %s but tables[].iceberg.partition_by asks for [%s]; "+
				"the sink does not change the partitioning of a table that holds data: set partition_by to match, "+
				"or recreate the target table and resync", l.table, target, tbl.Spec(), fieldList(sh.partition))
		}
		upd := tx.UpdateSpec(true)
		cur := tbl.Spec()
		for i := range cur.NumFields() {
			upd = upd.RemoveField(cur.Field(i).Name)
		}
		for _, f := range sh.partition {
			_, tr, _ := resolveTransform(l.table, sc, f, "partition_by")
			upd = upd.AddField(f.Column, tr, partitionFieldName(f))
		}
		if err := upd.Commit(); err != nil {
			return sinks.Poisonf("table %s: partitioning Iceberg table %s by [%s]: %w", l.table, target, fieldList(sh.partition), err)
		}
		changed = true
	}
	if !tbl.SortOrder().Equals(order) && !(order.IsUnsorted() && tbl.SortOrder().IsUnsorted()) {
		if err := tx.ReplaceSortOrder(order); err != nil {
			return sinks.Poisonf("table %s: setting the sort order of Iceberg table %s: %w", l.table, target, err)
		}
		changed = true
	}
	props := iceberg.Properties{}
	for k, v := range sh.props {
		if tbl.Properties()[k] != v {
			props[k] = v
		}
	}
	if len(props) > 0 {
		if err := tx.SetProperties(props); err != nil {
			return sinks.Poisonf("table %s: setting properties of Iceberg table %s: %w", l.table, target, err)
		}
		changed = true
	}
	if !changed {
		return nil
	}
	if _, err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing the layout of iceberg table %s: %w", target, err)
	}
	s.log.InfoContext(ctx, "set iceberg table layout", logkey.Table, l.table, logkey.Target, target,
		logkey.PartitionBy, fieldList(sh.partition), logkey.SortOrder, order.String())
	return nil
}

func fieldList(fields []config.PartitionField) string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.String()
	}
	return strings.Join(out, ", ")
}

// sortOrder builds the table sort order of fields against sc.
func sortOrder(tbl string, sc *iceberg.Schema, fields []config.SortField) (table.SortOrder, error) {
	if len(fields) == 0 {
		return table.UnsortedSortOrder, nil
	}
	out := make([]table.SortField, len(fields))
	for i, f := range fields {
		col, tr, err := resolveTransform(tbl, sc, f.PartitionField, "sort_by")
		if err != nil {
			return table.SortOrder{}, err
		}
		out[i] = table.SortField{SourceIDs: []int{col.ID}, Transform: tr, Direction: table.SortASC, NullOrder: table.NullsLast}
		if f.Descending {
			out[i].Direction = table.SortDESC
		}
		if f.NullsFirst {
			out[i].NullOrder = table.NullsFirst
		}
	}
	order, err := table.NewSortOrder(1, out)
	if err != nil {
		return table.SortOrder{}, sinks.Poisonf("table %s: tables[].iceberg.sort_by: %w", tbl, err)
	}
	return order, nil
}

// deleteScope is where a table's equality deletes go.
type deleteScope int

const (
	// scopeTable writes deletes in the table's default spec, from the batch's keys: an
	// unpartitioned table, or one partitioned only by key columns, where a key's partition never
	// changes.
	scopeTable deleteScope = iota
	// scopeOldImage writes each delete in the partition of the row it deletes, read from the
	// table (oldImages): a table partitioned by other columns, whose update can move a row to
	// another partition while the batch carries only its new image (and a delete only its key).
	// A delete file scoped to a partition applies only to data files of that partition.
	scopeOldImage
	// scopeGlobal writes deletes in an unpartitioned spec: they apply to data files of every
	// partition and spec (Iceberg spec, "Scan Planning": when the partitions are equal or the
	// delete's spec is unpartitioned). Used only for a table whose data may be in several
	// partitioned specs (partitioning changed by another tool). ClickHouse 26.7 does not apply
	// such deletes to partitioned data files (docs/iceberg.md).
	scopeGlobal
)

// deletesScope decides where tbl's equality deletes go, and for scopeGlobal returns the
// unpartitioned spec to write them in.
func deletesScope(tbl *table.Table, l layout) (deleteScope, int, error) {
	spec := tbl.Spec()
	if spec.IsUnpartitioned() {
		return scopeTable, spec.ID(), nil
	}
	otherPartitioned := slices.ContainsFunc(tbl.Metadata().PartitionSpecs(), func(p iceberg.PartitionSpec) bool {
		return p.ID() != spec.ID() && !p.IsUnpartitioned()
	})
	if !otherPartitioned {
		if len(partitionOnlyColumns(tbl, l)) == 0 {
			return scopeTable, spec.ID(), nil
		}
		return scopeOldImage, spec.ID(), nil
	}
	for _, p := range tbl.Metadata().PartitionSpecs() {
		if p.IsUnpartitioned() {
			return scopeGlobal, p.ID(), nil
		}
	}
	return 0, 0, sinks.Poisonf("table %s: Iceberg table %v has several partition specs and no unpartitioned one: the sink "+
		"cannot place an equality delete where the row's old image is; recreate the target table with Sluice and resync",
		l.table, tbl.Identifier())
}

// partitionOnlyColumns are the source columns of tbl's partition spec that are not key columns.
func partitionOnlyColumns(tbl *table.Table, l layout) []string {
	spec := tbl.Spec()
	var out []string
	for i := range spec.NumFields() {
		name, _ := tbl.Schema().FindColumnName(spec.Field(i).SourceID())
		if !slices.ContainsFunc(l.keyCols(), func(c outCol) bool { return c.name == name }) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// oldImages returns, for the rows of b selected by rows, the key and the partition columns of
// the rows the table holds under those keys: what the equality deletes must carry so that the
// partitioned writer puts each in the partition of the row it deletes. Keys the table does not
// hold get none (nothing to delete). It scans the table as loaded (the branch head the commit is
// pinned to), with deletes applied, reading only those columns of the data files whose key
// statistics overlap the batch's keys. The caller releases the records.
func oldImages(ctx context.Context, tbl *table.Table, b sinks.Batch, rows []bool, l layout) ([]arrow.RecordBatch, error) {
	keys := l.keyCols()
	want := map[string]bool{}
	for i, keep := range rows {
		if keep {
			want[keyString(b.Record, i, keys, func(c outCol) string { return c.src })] = true
		}
	}
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, k.name)
	}
	names = append(names, partitionOnlyColumns(tbl, l)...)
	opts := []table.ScanOption{table.WithSelectedFields(names...)}
	if filter, ok := keyRange(b.Record, rows, keys[0]); ok {
		opts = append(opts, table.WithRowFilter(filter))
	}
	_, itr, err := tbl.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the old images of the batch's keys: %w", err)
	}
	var out []arrow.RecordBatch
	release := func() {
		for _, r := range out {
			r.Release()
		}
	}
	for rec, err := range itr {
		if err != nil {
			release()
			return nil, fmt.Errorf("reading the old images of the batch's keys: %w", err)
		}
		keep := make([]bool, rec.NumRows())
		n := 0
		for i := range keep {
			keep[i] = want[keyString(rec, i, keys, func(c outCol) string { return c.name })]
			if keep[i] {
				n++
			}
		}
		if n == 0 {
			rec.Release()
			continue
		}
		sel, err := filterRows(ctx, rec, keep)
		rec.Release()
		if err != nil {
			release()
			return nil, err
		}
		out = append(out, sel)
	}
	return out, nil
}

// keyString is row i's key as text, comparable between a batch record and a table scan (both
// Arrow, with the same logical types); column names the key columns' names in rec.
func keyString(rec arrow.RecordBatch, i int, keys []outCol, column func(outCol) string) string {
	var sb strings.Builder
	for _, k := range keys {
		idx := rec.Schema().FieldIndices(column(k))
		if len(idx) == 1 {
			sb.WriteString(rec.Column(idx[0]).ValueStr(i))
		}
		sb.WriteByte(0)
	}
	return sb.String()
}

// filterRows returns the rows of rec selected by keep. The caller releases the result.
func filterRows(ctx context.Context, rec arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
	bld := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer bld.Release()
	bld.AppendValues(keep, nil)
	mask := bld.NewBooleanArray()
	defer mask.Release()
	out, err := compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("selecting old images: %w", err)
	}
	return out, nil
}

// globalDeleteWriter returns a view of tbl whose default spec is the unpartitioned spec specID,
// for writing equality deletes that apply to every partition. It only writes files; the caller
// commits them in its own transaction on tbl.
func globalDeleteWriter(tbl *table.Table, specID int) (*table.Table, error) {
	b, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err != nil {
		return nil, fmt.Errorf("reading the table metadata: %w", err)
	}
	if err := b.SetDefaultSpecID(specID); err != nil {
		return nil, fmt.Errorf("selecting the unpartitioned spec %d: %w", specID, err)
	}
	meta, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("building the unpartitioned view of the table: %w", err)
	}
	return table.New(tbl.Identifier(), meta, tbl.MetadataLocation(), tbl.FS, nil), nil
}
