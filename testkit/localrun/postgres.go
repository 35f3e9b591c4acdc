package localrun

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ScanPostgres reads columns of a source table as text (NULL as "NULL"), keyed by key, over a
// connection of its own. Intervals print under IntervalStyle iso_8601, the ISO 8601 text the
// sinks hold. A test that reads the same database again and again uses Pools.Scan.
func ScanPostgres(ctx context.Context, dsn, table, key string, columns []string) (Table, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return Table{}, fmt.Errorf("connecting to the source: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return scanPostgres(ctx, conn, table, key, columns)
}

// scanPostgres is ScanPostgres on an open connection, which it leaves with the IntervalStyle it
// found.
func scanPostgres(ctx context.Context, conn *pgx.Conn, table, key string, columns []string) (Table, error) {
	if _, err := conn.Exec(ctx, "SET intervalstyle = iso_8601"); err != nil {
		return Table{}, fmt.Errorf("setting IntervalStyle iso_8601 to read %s: %w", table, err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "RESET intervalstyle") }()
	exprs, err := canonicalExprs(ctx, conn, table, columns)
	if err != nil {
		return Table{}, err
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT %s::text, %s FROM %s", pgx.Identifier{key}.Sanitize(),
		strings.Join(exprs, ", "), table))
	if err != nil {
		return Table{}, fmt.Errorf("reading %s: %w", table, err)
	}
	defer rows.Close()
	out := Table{Columns: columns, Rows: map[string][]string{}}
	for rows.Next() {
		vals := make([]string, len(columns)+1)
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return Table{}, err
		}
		out.Rows[vals[0]] = vals[1:]
	}
	return out, rows.Err()
}

// canonicalExprs returns, per column, SQL that prints its value the way valueText prints the
// Arrow value: arrays as JSON (but columns declared with several dimensions, which are carried as
// their text, as text), timestamps as UTC RFC 3339 with microseconds, NULL as "NULL".
func canonicalExprs(ctx context.Context, conn *pgx.Conn, table string, columns []string) ([]string, error) {
	types := map[string]string{}
	rows, err := conn.Query(ctx, `SELECT a.attname, CASE WHEN a.attndims > 1 THEN 'M' ELSE t.typcategory::text END, t.typname FROM pg_attribute a
		JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = $1::regclass AND a.attnum > 0`, table)
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", table, err)
	}
	for rows.Next() {
		var name, cat, typ string
		if err := rows.Scan(&name, &cat, &typ); err != nil {
			return nil, err
		}
		types[name] = cat + ":" + typ
	}
	rows.Close()
	exprs := make([]string, len(columns))
	for i, c := range columns {
		id := pgx.Identifier{c}.Sanitize()
		expr := id + "::text"
		switch t := types[c]; {
		case strings.HasPrefix(t, "A:"):
			expr = "array_to_json(" + id + ")::text"
		case t == "D:timestamptz":
			expr = "to_char(" + id + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
		case t == "D:timestamp":
			expr = "to_char(" + id + ", 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
		}
		exprs[i] = "coalesce(" + expr + ", 'NULL')"
	}
	return exprs, nil
}

// Diff lists the first differences between want (the source) and got (the sink), key by key:
// missing, extra and stale rows. Empty means equal. A source value is compared as got.Stored
// maps it (the sink's documented lossy mapping), when got has one.
func Diff(want, got Table, max int) []string {
	var out []string
	stored := func(_ int, text string) string { return text }
	if got.Stored != nil {
		stored = got.Stored
	}
	add := func(s string) bool {
		out = append(out, s)
		return len(out) < max
	}
	for k, w := range want.Rows {
		g, ok := got.Rows[k]
		if !ok {
			if !add(fmt.Sprintf("key %s missing in sink (source %v)", k, w)) {
				return out
			}
			continue
		}
		for i := range w {
			if stored(i, w[i]) != g[i] {
				if !add(fmt.Sprintf("key %s stale: %s is %q in sink, %q in source", k, want.Columns[i], g[i], w[i])) {
					return out
				}
				break
			}
		}
	}
	for k, g := range got.Rows {
		if _, ok := want.Rows[k]; !ok {
			if !add(fmt.Sprintf("key %s extra in sink %v (deleted in source)", k, g)) {
				return out
			}
		}
	}
	return out
}
