package clickhouse

import (
	"fmt"
	"strings"

	"github.com/sluicecdc/sluice/sinks"
)

// createTableSQL returns the CREATE TABLE statement of l. Modern tables are
// ReplacingMergeTree(_version, _is_deleted): FINAL keeps the image with the highest version per
// key and hides it when it is a tombstone. Compatible tables are ReplacingMergeTree(_version) with
// _is_deleted as a plain column; their view (createViewSQL) hides tombstones.
func (l *layout) createTableSQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n", l.qualified())
	for i, c := range l.cols {
		fmt.Fprintf(&b, "    %s %s", quote(c.name), c.typ)
		if i < len(l.cols)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(") ENGINE = ")
	b.WriteString(l.engine())
	b.WriteString("\nORDER BY (")
	keys := append(append([]string(nil), l.keys...), ColMarker)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(k))
	}
	b.WriteString(")")
	return b.String()
}

// engine returns the table engine of l.
func (l *layout) engine() string {
	if l.modern {
		return "ReplacingMergeTree(" + quote(ColVersion) + ", " + quote(ColDeleted) + ")"
	}
	return "ReplacingMergeTree(" + quote(ColVersion) + ")"
}

// createViewSQL returns the statement creating the view of a compatible table: the current image
// of every live key. The filter runs after FINAL has picked the last image of each key, so a
// tombstone hides its key rather than letting an older image through.
func (l *layout) createViewSQL() string {
	return fmt.Sprintf("CREATE VIEW IF NOT EXISTS %s.%s AS SELECT * FROM %s FINAL WHERE %s = 0",
		quote(l.db), quote(l.viewName()), l.qualified(), quote(ColDeleted))
}

// dropViewSQL returns the statement dropping the view of a compatible table.
func (l *layout) dropViewSQL() string {
	return fmt.Sprintf("DROP TABLE IF EXISTS %s.%s", quote(l.db), quote(l.viewName()))
}

// addColumnSQL returns the ALTER TABLE statement adding c.
func (l *layout) addColumnSQL(c column) string {
	return fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", l.qualified(), quote(c.name), c.typ)
}

// insertSQL returns the INSERT statement naming every column of l in order (a batch insert
// must name its columns on old servers).
func (l *layout) insertSQL() string {
	names := make([]string, len(l.cols))
	for i, c := range l.cols {
		names[i] = quote(c.name)
	}
	return fmt.Sprintf("INSERT INTO %s (%s)", l.qualified(), strings.Join(names, ", "))
}

// existing describes a table found in the server.
type existing struct {
	engine     string            // system.tables.engine
	engineFull string            // system.tables.engine_full
	sortingKey string            // system.tables.sorting_key
	columns    map[string]string // name -> type
	order      []string          // column names in table order
}

// tableModern reports the layout an existing table was created with, from its engine. A table
// the sink did not create is poison.
func tableModern(e existing, db, name string) (bool, error) {
	full := strings.ReplaceAll(e.engineFull, "`", "")
	switch {
	case e.engine == "ReplacingMergeTree" && strings.HasPrefix(full, "ReplacingMergeTree("+ColVersion+", "+ColDeleted+")"):
		return true, nil
	case e.engine == "ReplacingMergeTree" && strings.HasPrefix(full, "ReplacingMergeTree("+ColVersion+")"):
		return false, nil
	}
	return false, sinks.Poisonf("target %s.%s exists but was not created by sluice (engine %s): drop it, or point "+
		"tables[].target at another table", db, name, e.engineFull)
}

// diff compares the existing table with l: it returns the columns to add and a poison error
// for anything else that differs (a changed type, a changed key, a missing sink column).
func (l *layout) diff(e existing) ([]column, error) {
	if got, want := strings.ReplaceAll(e.sortingKey, "`", ""), l.sortingKey(); got != want {
		return nil, sinks.Poisonf("table %s: target %s.%s is ordered by (%s) but the key is now (%s); ClickHouse cannot "+
			"change a table's sorting key: drop the target and resync the table", l.source, l.db, l.name, got, want)
	}
	var add []column
	var errs []string
	for _, c := range l.cols {
		typ, ok := e.columns[c.name]
		switch {
		case !ok && (c.role == roleData || c.role == roleMeta) && !c.key:
			add = append(add, c)
		case !ok:
			errs = append(errs, fmt.Sprintf("column %q (%s) is missing", c.name, c.typ))
		case typ != c.typ:
			errs = append(errs, fmt.Sprintf("column %q is %s, the table's mapping needs %s", c.name, typ, c.typ))
		}
	}
	if len(errs) > 0 {
		return nil, sinks.Poisonf("table %s: target %s.%s does not match the source: %s; ClickHouse cannot change a "+
			"column's type in place: alter the column yourself or drop the target and resync the table",
			l.source, l.db, l.name, strings.Join(errs, "; "))
	}
	return add, nil
}
