package batch

import "time"

// Op is the kind of a change row, as the __op context column carries it.
type Op uint8

// The kinds of change rows.
const (
	OpInsert Op = iota + 1
	OpUpdate
	OpDelete
	OpSnapshot // a row read by the snapshot (backfill)
)

// String returns the name __op carries: insert, update, delete or snapshot-read.
func (o Op) String() string {
	switch o {
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	case OpSnapshot:
		return "snapshot-read"
	}
	return "unknown"
}

// Value is one column value of a change row in Postgres' text output format (the format pgoutput
// sends and a text-mode SELECT or COPY returns), so the snapshot and the stream share one decoding.
type Value struct {
	Text      []byte // the text form; ignored when Null or Unchanged
	Null      bool   // SQL NULL
	Unchanged bool   // an unchanged TOASTed value ('u' in pgoutput): the old value is kept, never NULL
}

// Change is one decoded change of one table, in the column order of the table's Schema.
type Change struct {
	Op       Op
	Pos      Position
	CommitTS time.Time
	// Values holds the new row for insert, update and snapshot-read, and the key (other columns
	// Null) for delete.
	Values []Value
	// OldKey holds the old key when an update changed the primary key; nil otherwise. Like
	// Values it is in the column order of the Schema (as pgoutput sends the old tuple); only the
	// key columns are read. Collapse turns such an update into a delete of OldKey and an upsert of
	// Values.
	OldKey []Value
}

// TableName is a schema-qualified Postgres table name.
type TableName struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
}

// String returns schema.name.
func (t TableName) String() string { return t.Schema + "." + t.Name }

// Column describes one source column. The source fills it from pg_attribute and pg_type; the
// Arrow mapping (ArrowSchema) reads TypeOID, TypeMod, Dims, Category and, for arrays, ElemOID.
type Column struct {
	Name     string `json:"name"`
	TypeOID  uint32 `json:"type_oid"`  // for a domain, the OID of its base type (pg_type.typbasetype)
	TypeName string `json:"type_name"` // format_type() output, e.g. numeric(12,2), text[]
	TypeMod  int32  `json:"type_mod"`  // atttypmod; -1 when unconstrained
	NotNull  bool   `json:"not_null"`
	Key      bool   `json:"key"` // part of the primary key (or the configured key)

	// Category is pg_type.typcategory of the column's type ("E" enum, "A" array, "N" numeric,
	// ...). Arrays whose OID is not a built-in one (arrays of enums or of extension types) are
	// recognized by category A.
	Category string `json:"category,omitempty"`
	// ElemOID is pg_type.typelem of an array type (its element type), 0 otherwise. Needed for
	// arrays whose OID is not a built-in one (arrays of enums).
	ElemOID uint32 `json:"elem_oid,omitempty"`
	// Dims is pg_attribute.attndims: the array dimensions the column was declared with (int[][]
	// is 2), 0 for other columns. Postgres does not enforce it; a column declared with more than
	// one dimension is carried as the array's text instead of a list.
	Dims int `json:"dims,omitempty"`
	// ElemCategory is pg_type.typcategory of the element type of an array, empty otherwise.
	ElemCategory string `json:"elem_category,omitempty"`
}

// Schema describes one source table as the stream and the snapshot see it.
type Schema struct {
	Table   TableName `json:"table"`
	Columns []Column  `json:"columns"`
}

// KeyIndexes returns the positions of the key columns, in column order.
func (s Schema) KeyIndexes() []int {
	var idx []int
	for i, c := range s.Columns {
		if c.Key {
			idx = append(idx, i)
		}
	}
	return idx
}
