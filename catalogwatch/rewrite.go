package catalogwatch

import (
	"fmt"
	"strings"

	"github.com/sluicecdc/sluice/source"
)

// Rewrite is how a table's own storage differs from its record.
type Rewrite struct {
	// Rewritten is set when the table's storage (relfilenode) changed.
	Rewritten bool
	// Columns are the columns whose catalog row changed with the rewrite, under their current
	// names: ALTER COLUMN ... TYPE (to the same type with USING, or a widening) rewrote their
	// values without writing them to the WAL. Empty for a maintenance rewrite (VACUUM FULL,
	// CLUSTER, pg_repack, SET TABLESPACE, and a TRUNCATE, which the stream carries).
	Columns []string
	// Unknown is set when the record cannot tell the two apart (it marks no column).
	Unknown bool
	// From and To are the storage before and after.
	From, To uint32
}

// Values reports whether the rewrite changed values the WAL does not carry (or may have).
func (rw Rewrite) Values() bool { return rw.Rewritten && (len(rw.Columns) > 0 || rw.Unknown) }

// CompareStorage returns how cur differs from the recorded storage rec of the same table (same
// OID). A rewrite changed values when a column that was live in rec and still is (matched by
// attnum, so a rename is the same column) has a new pg_attribute row: ALTER COLUMN ... TYPE
// writes it in the transaction that rewrites the table, and maintenance rewrites never touch it.
// A retype that is not a widening (source.Widens) is left out: the stream's RELATION carries it
// and the table stops with SchemaChanged at its next change, as for any such retype. A column
// row changed without a rewrite (SET NOT NULL, SET STATISTICS, a rename, a widening Postgres
// did in place) changed no value.
func CompareStorage(rec, cur source.TableStorage) Rewrite {
	rw := Rewrite{Rewritten: rec.RelFileNode != cur.RelFileNode, From: rec.RelFileNode, To: cur.RelFileNode}
	if !rw.Rewritten {
		return rw
	}
	if len(rec.Columns) == 0 {
		rw.Unknown = true
		return rw
	}
	was := make(map[int]source.ColumnStamp, len(rec.Columns))
	for _, c := range rec.Columns {
		was[c.Num] = c
	}
	for _, c := range cur.Columns {
		old, ok := was[c.Num]
		if !ok || old.Xmin == c.Xmin {
			continue
		}
		if !old.SameType(c) && !source.Widens(old.Column(), c.Column()) {
			continue
		}
		rw.Columns = append(rw.Columns, c.Name)
	}
	return rw
}

// reason says what the rewrite changed; "" when it changed no value.
func (rw Rewrite) reason() string {
	switch {
	case !rw.Values():
		return ""
	case rw.Unknown:
		return fmt.Sprintf("its storage was rewritten (relfilenode %d → %d) and the record of its columns cannot tell a rewrite of values from maintenance", rw.From, rw.To)
	}
	word := "column"
	if len(rw.Columns) > 1 {
		word = "columns"
	}
	return fmt.Sprintf("its storage was rewritten (relfilenode %d → %d) with a change of %s %s (ALTER COLUMN ... TYPE, with or without USING): Postgres rewrote every row's value without writing them to the WAL",
		rw.From, rw.To, word, strings.Join(rw.Columns, ", "))
}
