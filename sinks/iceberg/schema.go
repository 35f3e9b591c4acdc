package iceberg

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// opColumn is the record column carrying each row's batch.Op.
const opColumn = batch.ColOp

// outCol is one column of the target table and where its values come from in a batch record.
type outCol struct {
	src   string      // column name in the batch record: the source column or a context column
	name  string      // column name in the Iceberg table
	field arrow.Field // the Arrow field written: the batch record's, or string for intervals
	key   bool        // part of the primary key
	// asText: the batch record's column is an interval (or a list of them), which Iceberg has
	// no type for: it is written as ISO 8601 text (batch.AppendInterval), as the Couchbase sink
	// does.
	asText bool
}

// layout is how one table's batch records map onto its Iceberg columns: the source columns in
// Schema order, then the named context columns in metadata order.
type layout struct {
	table string // source table, for messages
	cols  []outCol
}

// keyCols returns the key columns in table order.
func (l layout) keyCols() []outCol {
	var out []outCol
	for _, c := range l.cols {
		if c.key {
			out = append(out, c)
		}
	}
	return out
}

// newLayout maps spec onto the Arrow schema of its batch records (the table's columns then the
// context tail). Problems are poison: they need a fix in Postgres or in the pipeline config.
func newLayout(spec sinks.TableSpec, rec *arrow.Schema) (layout, error) {
	l := layout{table: spec.Schema.Table.String()}
	taken := map[string]bool{}
	nkeys := 0
	for _, c := range spec.Schema.Columns {
		f, err := recordField(rec, c.Name, l.table)
		if err != nil {
			return layout{}, err
		}
		taken[c.Name] = true
		text := false
		switch t := f.Type.(type) {
		case *arrow.MonthDayNanoIntervalType:
			f.Type, text = arrow.BinaryTypes.String, true
		case *arrow.ListType:
			if t.Elem().ID() == arrow.INTERVAL_MONTH_DAY_NANO {
				elem := t.ElemField()
				elem.Type = arrow.BinaryTypes.String
				f.Type, text = arrow.ListOfField(elem), true
			}
		}
		l.cols = append(l.cols, outCol{src: c.Name, name: c.Name, field: f, key: c.Key, asText: text})
		if c.Key {
			nkeys++
		}
	}
	if nkeys == 0 {
		return layout{}, sinks.Poisonf("table %s has no primary key: the Iceberg sink upserts and deletes by key; "+
			"add a primary key in Postgres or configure key columns for %s", l.table, spec.Target)
	}
	for _, m := range spec.Metadata {
		src, ok := batch.ContextColumn(m.From)
		if !ok {
			return layout{}, sinks.Poisonf("table %s: metadata entry from %q is not a context column; use one of %s",
				l.table, m.From, strings.Join(batch.MetadataNames(), ", "))
		}
		if m.As == "" || taken[m.As] {
			return layout{}, sinks.Poisonf("table %s: metadata entry {from: %s, as: %q} needs a name that is not "+
				"already a column of the table", l.table, m.From, m.As)
		}
		taken[m.As] = true
		f, err := recordField(rec, src, l.table)
		if err != nil {
			return layout{}, err
		}
		l.cols = append(l.cols, outCol{src: src, name: m.As, field: f})
	}
	return l, nil
}

func recordField(rec *arrow.Schema, name, tbl string) (arrow.Field, error) {
	idx := rec.FieldIndices(name)
	if len(idx) != 1 {
		return arrow.Field{}, sinks.Poisonf("table %s: the batch carries no column %q (or more than one); "+
			"the batch does not match the table's schema", tbl, name)
	}
	return rec.Field(idx[0]), nil
}

// icebergType converts one column's Arrow type, as a poison error naming the column when the type
// has no Iceberg equivalent.
func (l layout) icebergType(c outCol) (iceberg.Type, error) {
	one := arrow.NewSchema([]arrow.Field{{Name: c.name, Type: c.field.Type, Nullable: true}}, nil)
	sc, err := table.ArrowSchemaToIcebergWithFreshIDs(one, true)
	if err != nil {
		return nil, sinks.Poisonf("table %s column %s: type %s has no Iceberg equivalent: %v; "+
			"cast the column in Postgres or leave it out of the publication", l.table, c.name, c.field.Type, err)
	}
	return sc.Field(0).Type, nil
}

// icebergSchema is the schema a new table gets: fresh field IDs, key columns required and listed
// as identifier fields, everything else optional (a NOT NULL constraint can be dropped later).
func (l layout) icebergSchema() (*iceberg.Schema, error) {
	fields := make([]arrow.Field, len(l.cols))
	for i, c := range l.cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.field.Type, Nullable: !c.key}
		if _, err := l.icebergType(c); err != nil {
			return nil, err
		}
	}
	sc, err := table.ArrowSchemaToIcebergWithFreshIDs(arrow.NewSchema(fields, nil), true)
	if err != nil {
		return nil, sinks.Poisonf("table %s: converting the schema to Iceberg: %w", l.table, err)
	}
	out := sc.Fields()
	var ids []int
	for i, c := range l.cols {
		if !c.key {
			out[i].Required = false
			continue
		}
		if isFloat(out[i].Type) {
			return nil, sinks.Poisonf("table %s: key column %s is %s; Iceberg equality deletes cannot use "+
				"floating-point columns, so this key cannot be replicated; use another key for the table",
				l.table, c.name, out[i].Type)
		}
		out[i].Required = true
		ids = append(ids, out[i].ID)
	}
	return iceberg.NewSchemaWithIdentifiers(0, ids, out...), nil
}

func isFloat(t iceberg.Type) bool {
	switch t.(type) {
	case iceberg.Float32Type, iceberg.Float64Type:
		return true
	}
	return false
}

// schemaDiff compares the desired layout with an existing table's schema. It returns the columns
// to add; a column the source no longer sends stays (NULL from now on); a widened type is
// promoted (promotions); any other difference (a changed type, a different key) is poison,
// since applying it would lose or misplace data.
func (l layout) schemaDiff(target string, have *iceberg.Schema) ([]outCol, error) {
	want, err := l.icebergSchema()
	if err != nil {
		return nil, err
	}
	var add []outCol
	for i, c := range l.cols {
		f, ok := have.FindFieldByName(c.name)
		if !ok {
			if c.key {
				return nil, sinks.Poisonf("table %s: key column %s is not in Iceberg table %s; the primary key "+
					"changed, which the sink cannot apply: recreate the target table and resync", l.table, c.name, target)
			}
			add = append(add, c)
			continue
		}
		if wt := want.Field(i).Type; wt.String() != f.Type.String() && !promotable(f.Type, wt) {
			return nil, sinks.Poisonf("table %s column %s: Iceberg table %s has type %s but the source now "+
				"sends %s; the sink does not change column types: alter the Iceberg column yourself (or "+
				"recreate the table and resync), then resume", l.table, c.name, target, f.Type, wt)
		}
	}
	for _, f := range have.Fields() {
		// A column the source no longer sends (DROP COLUMN, a metadata entry removed) stays in
		// the table, NULL in every row written since, as on every sink (docs/schema-changes.md).
		// Only a required one cannot take NULL.
		if f.Required && !slices.ContainsFunc(l.cols, func(c outCol) bool { return c.name == f.Name }) {
			return nil, sinks.Poisonf("table %s: Iceberg table %s has required column %s which the source no "+
				"longer sends (dropped or renamed in Postgres); a required column cannot be left NULL: "+
				"recreate the target table and resync (sluice resync --table %s)", l.table, target, f.Name, l.table)
		}
	}
	var wantKeys, haveKeys []string
	for _, c := range l.keyCols() {
		wantKeys = append(wantKeys, c.name)
	}
	for _, id := range have.IdentifierFieldIDs {
		if name, ok := have.FindColumnName(id); ok {
			haveKeys = append(haveKeys, name)
		}
	}
	slices.Sort(wantKeys)
	slices.Sort(haveKeys)
	if !slices.Equal(wantKeys, haveKeys) {
		return nil, sinks.Poisonf("table %s: the key is (%s) but Iceberg table %s is keyed on (%s); the sink "+
			"cannot change the key: recreate the target table and resync", l.table,
			strings.Join(wantKeys, ", "), target, strings.Join(haveKeys, ", "))
	}
	return add, nil
}

// withFieldIDs returns the Arrow field for c named and numbered as in the Iceberg schema, so the
// writers match columns by field ID.
func withFieldIDs(c outCol, sc *iceberg.Schema) (arrow.Field, error) {
	f, ok := sc.FindFieldByName(c.name)
	if !ok {
		return arrow.Field{}, fmt.Errorf("column %s is not in the Iceberg schema", c.name)
	}
	return arrow.Field{Name: c.name, Type: withNestedIDs(c.field.Type, f.Type), Nullable: !f.Required,
		Metadata: fieldID(f.ID)}, nil
}

func fieldID(id int) arrow.Metadata {
	return arrow.NewMetadata([]string{table.ArrowParquetFieldIDKey}, []string{strconv.Itoa(id)})
}

// withNestedIDs returns dt with the Iceberg field IDs of t on its nested fields (list elements,
// the only nested type batches carry); other types are returned as they are.
func withNestedIDs(dt arrow.DataType, t iceberg.Type) arrow.DataType {
	lt, ok := dt.(*arrow.ListType)
	it, ok2 := t.(*iceberg.ListType)
	if !ok || !ok2 {
		return dt
	}
	elem := lt.ElemField()
	elem.Type = withNestedIDs(elem.Type, it.Element)
	elem.Metadata = fieldID(it.ElementID)
	return arrow.ListOfField(elem)
}

// identifier splits a target such as raw.orders into the Iceberg namespace and table name.
func identifier(target string) (table.Identifier, error) {
	parts := strings.Split(target, ".")
	if len(parts) < 2 || slices.Contains(parts, "") {
		return nil, sinks.Poisonf("target %q: the Iceberg sink wants namespace.table, e.g. raw.orders", target)
	}
	return parts, nil
}

// tableName is a short form for messages.
func tableName(spec sinks.TableSpec) string {
	var zero batch.TableName
	if spec.Schema.Table == zero {
		return spec.Target
	}
	return spec.Schema.Table.String()
}
