package localrun

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ScanPostgres reads columns of a source table as text (NULL as "NULL"), keyed by key.
func ScanPostgres(ctx context.Context, dsn, table, key string, columns []string) (Table, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return Table{}, fmt.Errorf("connecting to the source: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	exprs := make([]string, len(columns))
	for i, c := range columns {
		exprs[i] = fmt.Sprintf("coalesce(%s::text, 'NULL')", pgx.Identifier{c}.Sanitize())
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

// Diff lists the first differences between want (the source) and got (the sink), key by key:
// missing, extra and stale rows. Empty means equal.
func Diff(want, got Table, max int) []string {
	var out []string
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
			if w[i] != g[i] {
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
