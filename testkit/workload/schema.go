package workload

import (
	"fmt"
	"strings"
)

// Kind is a column's type as the workload generates and compares it.
type Kind int

// The kinds of column the workload covers: every type the Iceberg, ClickHouse and Couchbase
// sinks all carry, and the types without a native mapping that every sink carries as the text
// Postgres prints (docs/types.md). inet, cidr and char(n) are left out: they travel as text like
// Text.
const (
	Int2 Kind = iota
	Int4
	Int8
	Float4
	Float8
	Numeric     // numeric(p,s): a decimal in every sink
	NumericText // unconstrained numeric: exact text in every sink
	Text        // text and varchar
	Bool
	Date
	Time
	Timestamp
	Timestamptz
	UUID
	Bytea
	JSON // json and jsonb
	Int4Array
	TextArray

	// Kinds carried as the text Postgres prints, compared with the source's ::text.
	Citext    // citext, and the domain wl_label over it
	Hstore    // hstore
	Ltree     // ltree
	Money     // money
	Macaddr   // macaddr
	Bit       // bit(8)
	Varbit    // bit varying
	Timetz    // time with time zone, with its own offset
	XML       // xml
	Tsvector  // tsvector
	Int4Range // int4range
	Composite // the composite type wl_pair (n integer, s text)
	IntMatrix // integer[][]: declared with two dimensions, so carried as text
	Enum      // the enum wl_mood
	Geometry  // PostGIS geometry (hex EWKB)
	Geography // PostGIS geography (hex EWKB)

	// OID is oid: an int64 in every sink.
	OID

	// Interval is interval: ISO 8601 text in every sink (batch.AppendInterval), compared with
	// the text the source prints under IntervalStyle iso_8601.
	Interval
	// IntervalArray is interval[]: a list of ISO 8601 texts.
	IntervalArray
)

// String names the kind as in messages.
func (k Kind) String() string {
	names := [...]string{"int2", "int4", "int8", "float4", "float8", "numeric", "numeric(text)", "text", "bool",
		"date", "time", "timestamp", "timestamptz", "uuid", "bytea", "json", "int4[]", "text[]",
		"citext", "hstore", "ltree", "money", "macaddr", "bit", "varbit", "timetz", "xml", "tsvector", "int4range",
		"composite", "int4[][]", "enum", "geometry", "geography", "oid", "interval", "interval[]"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// IsArray reports whether the kind is an array.
func (k Kind) IsArray() bool { return k == Int4Array || k == TextArray || k == IntervalArray }

// Column is one column of a workload table.
type Column struct {
	Name string
	SQL  string // the Postgres type as declared
	Kind Kind
	Key  bool
	// Toast marks a large text column stored out of line (STORAGE EXTERNAL) that updates of
	// other columns leave unchanged, so the stream carries it as an unchanged TOAST value.
	Toast bool
}

// Table is one workload table in schema public.
type Table struct {
	Name    string
	Columns []Column
	// Partitioning, when set, makes the table partitioned (a relkind 'p' root).
	Partitioning *Partitioning
}

// Partitioning partitions a table by range of one integer key column, in partitions of Width
// values: partition i holds [i*Width, (i+1)*Width) and is named <table>_p<i>. The first Initial
// exist from the start; the generator adds the others, up to Max, while it runs: the even ones
// created alone and attached (ATTACH PARTITION), the odd ones created as PARTITION OF.
type Partitioning struct {
	Column       string
	Width        int
	Initial, Max int
}

// partitionDDL returns the statements that add partition i of t.
func (t *Table) partitionDDL(i int) []string {
	p := t.Partitioning
	name := fmt.Sprintf("%s_p%d", t.Qualified(), i)
	bounds := fmt.Sprintf("FOR VALUES FROM (%d) TO (%d)", i*p.Width, (i+1)*p.Width)
	if i < p.Initial || i%2 == 1 {
		return []string{fmt.Sprintf("CREATE TABLE %s PARTITION OF %s %s", name, t.Qualified(), bounds)}
	}
	// Attached empty: the rows a table holds when it is attached are not in the WAL.
	return []string{
		fmt.Sprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING STORAGE)", name, t.Qualified()),
		fmt.Sprintf("ALTER TABLE %s ATTACH PARTITION %s %s", t.Qualified(), name, bounds),
	}
}

// Qualified is the table's schema-qualified name, public.<name>.
func (t *Table) Qualified() string { return "public." + t.Name }

// Keys returns the key columns in table order.
func (t *Table) Keys() []Column {
	var out []Column
	for _, c := range t.Columns {
		if c.Key {
			out = append(out, c)
		}
	}
	return out
}

// Values returns the non-key columns in table order.
func (t *Table) Values() []Column {
	var out []Column
	for _, c := range t.Columns {
		if !c.Key {
			out = append(out, c)
		}
	}
	return out
}

// DDL returns the statements that create the table.
func (t *Table) DDL() []string {
	var cols, keys []string
	for _, c := range t.Columns {
		null := ""
		if c.Key {
			null = " NOT NULL"
			keys = append(keys, c.Name)
		}
		cols = append(cols, c.Name+" "+c.SQL+null)
	}
	partitioned := ""
	if t.Partitioning != nil {
		partitioned = " PARTITION BY RANGE (" + t.Partitioning.Column + ")"
	}
	out := []string{fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s))%s", t.Qualified(),
		strings.Join(cols, ", "), strings.Join(keys, ", "), partitioned)}
	if t.Partitioning != nil {
		for i := range t.Partitioning.Initial {
			out = append(out, t.partitionDDL(i)...)
		}
	}
	for _, c := range t.Columns {
		if c.Toast {
			out = append(out, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET STORAGE EXTERNAL", t.Qualified(), c.Name))
		}
	}
	return out
}

// setupDDL creates what the tables' types need: the extensions (from Debian's postgresql
// contrib, and PostGIS), an enum, a composite type and two domains.
func setupDDL() []string {
	return []string{
		"CREATE EXTENSION IF NOT EXISTS citext",
		"CREATE EXTENSION IF NOT EXISTS hstore",
		"CREATE EXTENSION IF NOT EXISTS ltree",
		"CREATE EXTENSION IF NOT EXISTS postgis",
		"CREATE TYPE public.wl_mood AS ENUM ('sad', 'ok', 'happy', 'so so')",
		"CREATE TYPE public.wl_pair AS (n integer, s text)",
		"CREATE DOMAIN public.wl_label AS citext CHECK (length(VALUE) <= 64)",
		"CREATE DOMAIN public.wl_intlist AS integer[]",
	}
}

// Tables are the workload's tables: wl_items (bigint key, a column of every native kind),
// wl_lines (composite key integer + text), wl_docs (uuid key, a TOASTed text column), wl_types
// (bigint key, a column of every kind carried as text, domains, and TOASTed citext and hstore)
// and wl_parts (partitioned by range of part, a key column, so a key change can move a row to
// another partition; two more partitions are added while the workload runs).
func Tables() []*Table {
	return []*Table{
		{Name: "wl_items", Columns: []Column{
			{Name: "id", SQL: "bigint", Kind: Int8, Key: true},
			{Name: "c_int2", SQL: "smallint", Kind: Int2},
			{Name: "c_int4", SQL: "integer", Kind: Int4},
			{Name: "c_int8", SQL: "bigint", Kind: Int8},
			{Name: "c_float4", SQL: "real", Kind: Float4},
			{Name: "c_float8", SQL: "double precision", Kind: Float8},
			{Name: "c_num", SQL: "numeric(12,3)", Kind: Numeric},
			{Name: "c_numtext", SQL: "numeric", Kind: NumericText},
			{Name: "c_text", SQL: "text", Kind: Text},
			{Name: "c_varchar", SQL: "varchar(40)", Kind: Text},
			{Name: "c_bool", SQL: "boolean", Kind: Bool},
			{Name: "c_date", SQL: "date", Kind: Date},
			{Name: "c_time", SQL: "time", Kind: Time},
			{Name: "c_ts", SQL: "timestamp", Kind: Timestamp},
			{Name: "c_tstz", SQL: "timestamptz", Kind: Timestamptz},
			{Name: "c_uuid", SQL: "uuid", Kind: UUID},
			{Name: "c_bytea", SQL: "bytea", Kind: Bytea},
			{Name: "c_json", SQL: "json", Kind: JSON},
			{Name: "c_jsonb", SQL: "jsonb", Kind: JSON},
			{Name: "c_ints", SQL: "integer[]", Kind: Int4Array},
			{Name: "c_texts", SQL: "text[]", Kind: TextArray},
		}},
		{Name: "wl_lines", Columns: []Column{
			{Name: "order_id", SQL: "integer", Kind: Int4, Key: true},
			{Name: "line", SQL: "text", Kind: Text, Key: true},
			{Name: "qty", SQL: "integer", Kind: Int4},
			{Name: "price", SQL: "numeric(10,2)", Kind: Numeric},
			{Name: "note", SQL: "varchar(60)", Kind: Text},
			{Name: "shipped", SQL: "boolean", Kind: Bool},
			{Name: "at", SQL: "timestamptz", Kind: Timestamptz},
			{Name: "tags", SQL: "text[]", Kind: TextArray},
		}},
		{Name: "wl_docs", Columns: []Column{
			{Name: "id", SQL: "uuid", Kind: UUID, Key: true},
			{Name: "version", SQL: "integer", Kind: Int4},
			{Name: "title", SQL: "text", Kind: Text},
			{Name: "body", SQL: "text", Kind: Text, Toast: true},
			{Name: "meta", SQL: "jsonb", Kind: JSON},
			{Name: "updated", SQL: "timestamp", Kind: Timestamp},
			{Name: "blob", SQL: "bytea", Kind: Bytea},
		}},
		{Name: "wl_types", Columns: []Column{
			{Name: "id", SQL: "bigint", Kind: Int8, Key: true},
			{Name: "c_citext", SQL: "citext", Kind: Citext},
			{Name: "c_label", SQL: "wl_label", Kind: Citext},
			{Name: "c_hstore", SQL: "hstore", Kind: Hstore},
			{Name: "c_ltree", SQL: "ltree", Kind: Ltree},
			{Name: "c_money", SQL: "money", Kind: Money},
			{Name: "c_mac", SQL: "macaddr", Kind: Macaddr},
			{Name: "c_bit", SQL: "bit(8)", Kind: Bit},
			{Name: "c_varbit", SQL: "bit varying", Kind: Varbit},
			{Name: "c_timetz", SQL: "timetz", Kind: Timetz},
			{Name: "c_xml", SQL: "xml", Kind: XML},
			{Name: "c_tsv", SQL: "tsvector", Kind: Tsvector},
			{Name: "c_range", SQL: "int4range", Kind: Int4Range},
			{Name: "c_pair", SQL: "wl_pair", Kind: Composite},
			{Name: "c_matrix", SQL: "integer[][]", Kind: IntMatrix},
			{Name: "c_mood", SQL: "wl_mood", Kind: Enum},
			{Name: "c_intlist", SQL: "wl_intlist", Kind: Int4Array},
			{Name: "c_citexts", SQL: "citext[]", Kind: TextArray},
			{Name: "c_oid", SQL: "oid", Kind: OID},
			{Name: "c_geom", SQL: "geometry", Kind: Geometry},
			{Name: "c_geog", SQL: "geography", Kind: Geography},
			{Name: "c_interval", SQL: "interval", Kind: Interval},
			{Name: "c_intervals", SQL: "interval[]", Kind: IntervalArray},
			{Name: "c_bigci", SQL: "citext", Kind: Citext, Toast: true},
			{Name: "c_bighs", SQL: "hstore", Kind: Hstore, Toast: true},
		}},
		{Name: "wl_parts", Partitioning: &Partitioning{Column: "part", Width: 100, Initial: 2, Max: 4}, Columns: []Column{
			{Name: "id", SQL: "bigint", Kind: Int8, Key: true},
			{Name: "part", SQL: "integer", Kind: Int4, Key: true},
			{Name: "name", SQL: "text", Kind: Text},
			{Name: "amount", SQL: "numeric(10,2)", Kind: Numeric},
			{Name: "at", SQL: "timestamptz", Kind: Timestamptz},
			{Name: "tags", SQL: "text[]", Kind: TextArray},
			{Name: "body", SQL: "text", Kind: Text, Toast: true},
		}},
	}
}
