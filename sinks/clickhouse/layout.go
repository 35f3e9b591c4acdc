package clickhouse

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
)

// The columns the sink adds to every table, after the data and metadata columns.
const (
	// ColVersion orders the images of one key: the commit LSN of the change (the snapshot's LSN
	// for backfilled rows). Equal versions resolve in insertion order.
	ColVersion = "_version"
	// ColDeleted is 1 for tombstones (and position markers), 0 for live rows.
	ColDeleted = "_is_deleted"
	// ColMarker is 1 for the position marker row each commit writes, 0 for data rows. It is the
	// last column of the sorting key, so markers never share a key with data rows.
	ColMarker = "_sluice_marker"
	// ColPosition holds the committed position (batch.SourcePosition text) on marker rows and is
	// empty on data rows.
	ColPosition = "_sluice_position"
)

// ViewSuffix names the view that hides tombstones on compatible tables: <table>_current.
const ViewSuffix = "_current"

// role says where a column's values come from.
type role uint8

const (
	roleData     role = iota // a source column
	roleMeta                 // a materialized context column
	roleVersion              // ColVersion
	roleDeleted              // ColDeleted
	roleMarker               // ColMarker
	rolePosition             // ColPosition
)

// column is one column of a target table.
type column struct {
	name     string
	typ      string // the ClickHouse type, spelled as system.columns prints it
	role     role
	field    int  // index of the record column holding the values (data and metadata columns)
	key      bool // part of the sorting key
	nullable bool // typ is Nullable(...)
}

// tableRef names a target table and the source table it replicates.
type tableRef struct {
	source   string // the source table, schema.name, for messages
	db, name string
}

// newTableRef resolves spec's target, [database.]table, with def as the default database.
func newTableRef(spec sinks.TableSpec, def string) (tableRef, error) {
	db, name, err := splitTarget(spec.Target, def)
	return tableRef{source: spec.Schema.Table.String(), db: db, name: name}, err
}

// qualified returns `db`.`name`.
func (t tableRef) qualified() string { return quote(t.db) + "." + quote(t.name) }

// layout is the shape of one target table: its name, its engine flavour and its columns in
// insert order (data, metadata, then the sink's own columns).
type layout struct {
	tableRef
	modern  bool
	cols    []column
	keys    []string
	numData int // record columns before the context tail
}

// newLayout maps spec to the columns of its target on a modern or compatible table. Columns
// whose type or name the sink cannot write are poison naming the table and column.
func newLayout(spec sinks.TableSpec, db, name string, modern bool) (*layout, error) {
	src := spec.Schema.Table.String()
	as, err := batch.ArrowSchema(spec.Schema)
	if err != nil {
		return nil, sinks.Poisonf("table %s: %w", src, err)
	}
	l := &layout{tableRef: tableRef{source: src, db: db, name: name}, modern: modern, numData: len(spec.Schema.Columns)}
	seen := map[string]string{}
	claim := func(colName, what string) error {
		if colName == "" || strings.ContainsAny(colName, "`\x00") {
			return sinks.Poisonf("table %s: %s %q cannot be a ClickHouse column name (empty, or holds a backquote or NUL); "+
				"rename it in the source or leave it out of the publication", src, what, colName)
		}
		if prev, dup := seen[colName]; dup {
			return sinks.Poisonf("table %s: %s %q clashes with %s of the same name in target %s.%s; "+
				"rename the metadata column (metadata: as) or the source column", src, what, colName, prev, db, name)
		}
		seen[colName] = what
		return nil
	}
	for _, internal := range []string{ColVersion, ColDeleted, ColMarker, ColPosition} {
		seen[internal] = "the sink's own column"
	}
	for i, c := range spec.Schema.Columns {
		if err := claim(c.Name, "column"); err != nil {
			return nil, err
		}
		typ, err := columnType(as.Field(i).Type, modern, !c.Key)
		if err != nil {
			return nil, sinks.Poisonf("table %s column %q (%s): %w", src, c.Name, c.TypeName, err)
		}
		if err := keyHolds(src, c, as.Field(i).Type, modern); err != nil {
			return nil, err
		}
		l.cols = append(l.cols, column{name: c.Name, typ: typ, role: roleData, field: i, key: c.Key, nullable: isNullable(typ)})
		if c.Key {
			l.keys = append(l.keys, c.Name)
		}
	}
	if len(l.keys) == 0 {
		return nil, sinks.Poisonf("table %s has no key column: give it a primary key or configure its key; "+
			"ClickHouse upserts and deletes by key", src)
	}
	ctxFields := batch.ContextFields()
	for _, m := range spec.Metadata {
		recCol, ok := batch.ContextColumn(m.From)
		if !ok {
			return nil, sinks.Poisonf("table %s: metadata column from %q is not a context column; use one of %s",
				src, m.From, strings.Join(batch.MetadataNames(), ", "))
		}
		if err := claim(m.As, "metadata column"); err != nil {
			return nil, err
		}
		idx, _ := batch.ContextIndex(l.numData, recCol)
		f := ctxFields[idx-l.numData]
		typ, err := columnType(f.Type, modern, f.Nullable)
		if err != nil {
			return nil, sinks.Poisonf("table %s metadata column %q: %w", src, m.As, err)
		}
		l.cols = append(l.cols, column{name: m.As, typ: typ, role: roleMeta, field: idx, nullable: f.Nullable})
	}
	l.cols = append(l.cols,
		column{name: ColVersion, typ: "UInt64", role: roleVersion, field: -1},
		column{name: ColDeleted, typ: "UInt8", role: roleDeleted, field: -1},
		column{name: ColMarker, typ: "UInt8", role: roleMarker, field: -1, key: true},
		column{name: ColPosition, typ: "String", role: rolePosition, field: -1},
	)
	return l, nil
}

// keyHolds refuses a key column the layout cannot store exactly: the compatible layout's
// DateTime keeps whole seconds, so two source keys within one second would be one sorting key,
// and ReplacingMergeTree would keep one row for both. Poison, naming the table, the column and
// the layout that holds the key.
func keyHolds(src string, c batch.Column, dt arrow.DataType, modern bool) error {
	if _, ts := dt.(*arrow.TimestampType); !c.Key || modern || !ts {
		return nil
	}
	return sinks.Poisonf("table %s: key column %q (%s) cannot be a key of the ClickHouse compatible layout, whose DateTime "+
		"keeps whole seconds: two keys within one second would become one row. Use the modern layout, whose "+
		"DateTime64(6) keeps microseconds (sink.clickhouse.schema: %s, ClickHouse %d.%d or later; a target created "+
		"with the compatible layout keeps it: drop it, then sluice resync --table %s), or choose key columns without "+
		"a timestamp (tables[].key)", src, c.Name, c.TypeName, config.SchemaModern, modernSince.Major, modernSince.Minor, src)
}

// CheckLayout checks, without a server, what EnsureTable checks of spec's target before it
// creates it: the columns' types and names, the key (one a compatible table can hold exactly:
// keyHolds), the metadata columns. modern is the layout the target gets (Sink.Modern for a new
// target). `sluice check` runs it; its error is poison naming the table and the fix.
func CheckLayout(spec sinks.TableSpec, database string, modern bool) error {
	db, name, err := splitTarget(spec.Target, database)
	if err != nil {
		return err
	}
	_, err = newLayout(spec, db, name, modern)
	return err
}

// viewName returns the name of the compatible table's tombstone-hiding view.
func (l *layout) viewName() string { return l.name + ViewSuffix }

// sortingKey returns the sorting key as system.tables prints it: the key columns, then ColMarker.
func (l *layout) sortingKey() string {
	return strings.Join(append(append([]string(nil), l.keys...), ColMarker), ", ")
}

// columnType maps the Arrow type of a batch column to its ClickHouse type. Non-key columns are
// Nullable (deletes carry only the key); arrays cannot be, so their NULL is an empty array.
func columnType(dt arrow.DataType, modern, nullable bool) (string, error) {
	if lt, ok := dt.(*arrow.ListType); ok {
		elem, err := scalarType(lt.Elem(), modern)
		if err != nil {
			return "", fmt.Errorf("array element: %w", err)
		}
		return "Array(Nullable(" + elem + "))", nil
	}
	t, err := scalarType(dt, modern)
	if err != nil {
		return "", err
	}
	if nullable {
		return "Nullable(" + t + ")", nil
	}
	return t, nil
}

// scalarType maps a scalar Arrow type of the batch mapping (batch.ArrowSchema) to ClickHouse.
func scalarType(dt arrow.DataType, modern bool) (string, error) {
	switch t := dt.(type) {
	case *arrow.Int16Type:
		return "Int16", nil
	case *arrow.Int32Type:
		return "Int32", nil
	case *arrow.Int64Type:
		return "Int64", nil
	case *arrow.Float32Type:
		return "Float32", nil
	case *arrow.Float64Type:
		return "Float64", nil
	case *arrow.Decimal128Type:
		return fmt.Sprintf("Decimal(%d, %d)", t.Precision, t.Scale), nil
	case *arrow.StringType, *arrow.BinaryType:
		return "String", nil
	case *arrow.BooleanType:
		if modern {
			return "Bool", nil
		}
		return "UInt8", nil
	case *arrow.Date32Type:
		if modern {
			return "Date32", nil
		}
		return "Date", nil
	case *arrow.Time64Type:
		return "String", nil // HH:MM:SS[.ffffff], as Postgres prints it
	case *arrow.TimestampType:
		if modern {
			return "DateTime64(6, 'UTC')", nil
		}
		return "DateTime('UTC')", nil
	case *arrow.MonthDayNanoIntervalType:
		return "String", nil // ISO 8601, P1Y2M3DT4H5M6.5S
	case *extensions.UUIDType:
		return "UUID", nil
	}
	return "", fmt.Errorf("arrow type %s has no ClickHouse mapping in this sink", dt)
}

func isNullable(typ string) bool { return strings.HasPrefix(typ, "Nullable(") }

// quote quotes an identifier with backquotes.
func quote(name string) string {
	return "`" + strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(name) + "`"
}

// splitTarget splits a target, [database.]table, using def when it names no database.
func splitTarget(target, def string) (db, name string, err error) {
	db, name = def, target
	if d, n, ok := strings.Cut(target, "."); ok {
		db, name = d, n
	}
	// Plain names only: the driver's batch insert parses the statement and cannot handle every
	// quoted name.
	if !batch.PlainName(db) || !batch.PlainName(name) {
		return "", "", sinks.Poisonf("target %q is not [database.]table with letters, digits and _ only; fix tables[].target", target)
	}
	return db, name, nil
}
