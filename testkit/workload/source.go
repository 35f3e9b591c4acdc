package workload

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Row is one row as text: its key and the canonical text of every column of the table, key
// columns included, in table order.
type Row struct {
	Key    Key
	Values []string
}

// sourceExpr is SQL printing column c as text the way Canon reads it.
func sourceExpr(c Column) string {
	id := pgx.Identifier{c.Name}.Sanitize()
	expr := id + "::text"
	switch c.Kind {
	case Timestamptz:
		expr = "to_char(" + id + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
	case Timestamp:
		expr = "to_char(" + id + ", 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
	case Date:
		expr = "to_char(" + id + ", 'YYYY-MM-DD')"
	case Bytea:
		expr = "encode(" + id + ", 'hex')"
	case Int4Array, TextArray, IntervalArray:
		expr = "array_to_json(" + id + ")::text"
	}
	return "coalesce(" + expr + ", 'NULL')"
}

// ReadSource reads every row of t from the source at dsn, in canonical text. Intervals print
// under IntervalStyle iso_8601, Postgres' own ISO 8601 text, which is what the sinks hold.
func ReadSource(ctx context.Context, dsn string, t *Table) ([]Row, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting to the source: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return readSource(ctx, conn, t)
}

// readSource is ReadSource on an open connection, whose IntervalStyle it sets to iso_8601.
func readSource(ctx context.Context, conn *pgx.Conn, t *Table) ([]Row, error) {
	if _, err := conn.Exec(ctx, "SET intervalstyle = iso_8601"); err != nil {
		return nil, fmt.Errorf("setting IntervalStyle iso_8601 to read %s: %w", t.Qualified(), err)
	}
	exprs := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		exprs[i] = sourceExpr(c)
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT %s FROM %s", strings.Join(exprs, ", "), t.Qualified()))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.Qualified(), err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		vals := make([]string, len(t.Columns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("reading %s: %w", t.Qualified(), err)
		}
		out = append(out, t.row(vals))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.Qualified(), err)
	}
	return out, nil
}

// row canonicalizes vals (one per column, table order) into a Row.
func (t *Table) row(vals []string) Row {
	r := Row{Values: make([]string, len(vals))}
	for i, c := range t.Columns {
		r.Values[i] = Canon(c.Kind, vals[i])
		if c.Key {
			r.Key = append(r.Key, r.Values[i])
		}
	}
	return r
}
