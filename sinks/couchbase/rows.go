package couchbase

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// maxDocSize is the largest document body Couchbase stores (20 MiB).
const maxDocSize = 20 << 20

// docOp is the write of one document: an upsert of body, or a remove when body is nil, by the
// row at pos (its __pos). fresh says the row is an insert or a snapshot read, whose key is most
// likely absent from the target.
type docOp struct {
	key   string
	body  []byte
	pos   batch.Position
	fresh bool
}

// field is one member of the document body: a JSON name and the record column it comes from.
type field struct {
	prefix  []byte // "name":
	col     int
	rawJSON bool
	hstore  bool // an hstore column: written as a JSON object (appendHstore)
}

// layout is how a table's rows become documents.
type layout struct {
	table  string
	keys   []int   // record columns of the key, in Schema order
	fields []field // data columns in Schema order, then the named context columns
	rawKey []bool  // rawJSON of each key column
	numCol int     // columns a record must have
}

// newLayout checks spec and derives its layout. A table without a key, an unknown context
// column and two members with the same name are poison.
func newLayout(spec sinks.TableSpec) (layout, error) {
	cols := spec.Schema.Columns
	l := layout{table: spec.Schema.Table.String(), numCol: len(cols) + batch.NumContextColumns}
	seen := map[string]string{}
	add := func(name string, col int, rawJSON bool, what string) error {
		if prev, dup := seen[name]; dup {
			return sinks.Poisonf("table %s: %s and %s would both be the document member %q; "+
				"rename the metadata entry (tables[].metadata[].as)", l.table, prev, what, name)
		}
		seen[name] = what
		l.fields = append(l.fields, field{prefix: append(appendJSONString(nil, name), ':'), col: col, rawJSON: rawJSON})
		return nil
	}
	for i, c := range cols {
		rawJSON := isJSONType(c.TypeOID)
		if err := add(c.Name, i, rawJSON, "column "+c.Name); err != nil {
			return layout{}, err
		}
		l.fields[len(l.fields)-1].hstore = !c.Key && batch.IsHstoreType(c.TypeName)
		if c.Key {
			l.keys = append(l.keys, i)
			l.rawKey = append(l.rawKey, rawJSON)
		}
	}
	if len(l.keys) == 0 {
		return layout{}, sinks.Poisonf("table %s has no primary key, and Couchbase documents need one; "+
			"add a primary key in Postgres or set tables[].key", l.table)
	}
	for _, m := range spec.Metadata {
		name, ok := batch.ContextColumn(m.From)
		if !ok {
			return layout{}, sinks.Poisonf("table %s: metadata entry %q is not a context column", l.table, m.From)
		}
		if m.As == "" {
			return layout{}, sinks.Poisonf("table %s: metadata entry %s has no name (as)", l.table, m.From)
		}
		idx, _ := batch.ContextIndex(len(cols), name)
		if err := add(m.As, idx, false, "metadata "+m.From); err != nil {
			return layout{}, err
		}
	}
	return l, nil
}

// check makes sure rec is a record of the layout's table: the table's columns by name, then the
// context tail.
func (l layout) check(rec arrow.RecordBatch, spec sinks.TableSpec) error {
	if int(rec.NumCols()) != l.numCol {
		return sinks.Poisonf("table %s: the batch has %d columns, the table spec %d and the context tail %d; "+
			"the batch was staged for another version of the table", l.table, rec.NumCols(), len(spec.Schema.Columns),
			batch.NumContextColumns)
	}
	sc := rec.Schema()
	for i, c := range spec.Schema.Columns {
		if got := sc.Field(i).Name; got != c.Name {
			return sinks.Poisonf("table %s: batch column %d is %s, the table spec says %s; "+
				"the batch was staged for another version of the table", l.table, i+1, got, c.Name)
		}
	}
	if _, ok := rec.Column(len(spec.Schema.Columns)).(*array.String); !ok {
		return sinks.Poisonf("table %s: the batch's %s column is %s, want utf8", l.table, batch.ColOp,
			rec.Column(len(spec.Schema.Columns)).DataType())
	}
	return nil
}

// plan turns a record into document writes, one per key: the last row of a key wins. (Rows the
// checkpoint covers were dropped before, by Apply's guard.) A row whose key or body cannot be a
// Couchbase document is poison naming the table and the key.
func (l layout) plan(rec arrow.RecordBatch) ([]docOp, error) {
	n := int(rec.NumRows())
	numData := l.numCol - batch.NumContextColumns
	opCol := rec.Column(numData).(*array.String)
	ke := keyEncoder{rawJSON: l.rawKey}
	for _, k := range l.keys {
		ke.cols = append(ke.cols, rec.Column(k))
	}
	positions, err := batch.RowPositions(rec)
	if err != nil {
		return nil, sinks.Poisonf("table %s: %w", l.table, err)
	}
	ops := make([]docOp, 0, n)
	index := make(map[string]int, n)
	var body []byte
	for i := 0; i < n; i++ {
		key, err := ke.key(i)
		if err != nil {
			return nil, sinks.Poisonf("table %s: row %d cannot be a Couchbase document: %w", l.table, i+1, err)
		}
		op := docOp{key: key, pos: positions[i]}
		switch opCol.Value(i) {
		case batch.OpInsert.String(), batch.OpSnapshot.String():
			op.fresh = true
		}
		if opCol.Value(i) != batch.OpDelete.String() {
			if body, err = l.body(body[:0], rec, i); err != nil {
				return nil, sinks.Poisonf("table %s: document %q: %w", l.table, shorten(key), err)
			}
			if len(body) > maxDocSize {
				return nil, sinks.Poisonf("table %s: document %q is %d bytes of JSON, more than Couchbase's "+
					"limit of %d; shrink the row in Postgres or leave the large column out of the publication",
					l.table, shorten(key), len(body), maxDocSize)
			}
			op.body = append([]byte(nil), body...)
		}
		if j, dup := index[key]; dup {
			ops[j] = op
			continue
		}
		index[key] = len(ops)
		ops = append(ops, op)
	}
	return ops, nil
}

// body writes the JSON document of row i.
func (l layout) body(dst []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	dst = append(dst, '{')
	for j, f := range l.fields {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, f.prefix...)
		var err error
		if f.hstore {
			dst, err = appendHstore(dst, rec.Column(f.col), i)
		} else {
			dst, err = appendJSONValue(dst, rec.Column(f.col), i, f.rawJSON)
		}
		if err != nil {
			return dst, fmt.Errorf("member %s: %w", f.prefix[:len(f.prefix)-1], err)
		}
	}
	return append(dst, '}'), nil
}
