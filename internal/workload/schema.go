package workload

import (
	"fmt"
	"strings"
)

// Kind is a column's type as the workload generates and compares it.
type Kind int

// The kinds of column the workload covers: every type the Iceberg, ClickHouse and Couchbase
// sinks all carry. interval is left out (Iceberg has no equivalent type), and so are inet,
// cidr, enums and char(n), which travel as text like Text.
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
)

// String names the kind as in messages.
func (k Kind) String() string {
	names := [...]string{"int2", "int4", "int8", "float4", "float8", "numeric", "numeric(text)", "text", "bool",
		"date", "time", "timestamp", "timestamptz", "uuid", "bytea", "json", "int4[]", "text[]"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// IsArray reports whether the kind is an array.
func (k Kind) IsArray() bool { return k == Int4Array || k == TextArray }

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
	out := []string{fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s))", t.Qualified(),
		strings.Join(cols, ", "), strings.Join(keys, ", "))}
	for _, c := range t.Columns {
		if c.Toast {
			out = append(out, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET STORAGE EXTERNAL", t.Qualified(), c.Name))
		}
	}
	return out
}

// Tables are the workload's tables: wl_items (bigint key, a column of every kind), wl_lines
// (composite key integer + text) and wl_docs (uuid key, a TOASTed text column).
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
	}
}
