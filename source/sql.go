package source

import (
	"fmt"
	"strings"

	"github.com/sluicecdc/sluice/batch"
)

// quoteIdent quotes a Postgres identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// quoteTable quotes a schema-qualified table name.
func quoteTable(t batch.TableName) string {
	return quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
}

// quoteLiteral quotes a string literal (for replication commands, which take no parameters).
func quoteLiteral(s string) string {
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}

// columnList quotes the names of all columns of s, comma-separated, in column order.
func columnList(s batch.Schema) string {
	names := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		names[i] = quoteIdent(c.Name)
	}
	return strings.Join(names, ", ")
}

// chunkQuery builds the keyset-paginated SELECT of one chunk of s: all columns in schema order,
// ordered by the key, after the key given as parameters $1..$n when after is true, of the rows
// the row filter where (tables[].where; "" for every row) keeps. The key
// columns' comparison uses their default btree ordering, the same one ORDER BY uses, so chunks
// neither overlap nor leave gaps.
func chunkQuery(s batch.Schema, where string, after bool, limit int) (string, error) {
	keys := s.KeyIndexes()
	if len(keys) == 0 {
		return "", fmt.Errorf("table %s has no key columns: keyset pagination needs a key", s.Table)
	}
	keyNames := make([]string, len(keys))
	params := make([]string, len(keys))
	for i, k := range keys {
		keyNames[i] = quoteIdent(s.Columns[k].Name)
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	var conds []string
	if where != "" {
		conds = append(conds, "("+where+")")
	}
	if after {
		conds = append(conds, fmt.Sprintf("(%s) > (%s)", strings.Join(keyNames, ", "), strings.Join(params, ", ")))
	}
	return chunkSelect(s, columnList(s), conds, limit), nil
}

// chunkSelect builds the SELECT of one chunk of s: the select list cols, the conditions conds
// (ANDed), ordered by the key, at most limit rows.
func chunkSelect(s batch.Schema, cols string, conds []string, limit int) string {
	keys := s.KeyIndexes()
	keyNames := make([]string, len(keys))
	for i, k := range keys {
		keyNames[i] = quoteIdent(s.Columns[k].Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "SELECT %s FROM %s", cols, quoteTable(s.Table))
	if len(conds) > 0 {
		b.WriteString(" WHERE " + strings.Join(conds, " AND "))
	}
	fmt.Fprintf(&b, " ORDER BY %s LIMIT %d", strings.Join(keyNames, ", "), limit)
	return b.String()
}

// lookupQuery builds a SELECT of the key columns followed by the columns cols of s for n keys:
// WHERE (k1, k2) IN (($1, $2), ($3, $4), ...).
func lookupQuery(s batch.Schema, cols []int, n int) string {
	keys := s.KeyIndexes()
	sel := make([]string, 0, len(keys)+len(cols))
	keyNames := make([]string, len(keys))
	for i, k := range keys {
		keyNames[i] = quoteIdent(s.Columns[k].Name)
		sel = append(sel, keyNames[i])
	}
	for _, c := range cols {
		sel = append(sel, quoteIdent(s.Columns[c].Name))
	}
	tuples := make([]string, n)
	p := 1
	for i := range tuples {
		ps := make([]string, len(keys))
		for j := range keys {
			ps[j] = fmt.Sprintf("$%d", p)
			p++
		}
		tuples[i] = "(" + strings.Join(ps, ", ") + ")"
	}
	return fmt.Sprintf("SELECT %s FROM %s WHERE (%s) IN (%s)", strings.Join(sel, ", "),
		quoteTable(s.Table), strings.Join(keyNames, ", "), strings.Join(tuples, ", "))
}
