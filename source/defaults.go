package source

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicecdc/sluice/batch"
)

// defaultsQuery lists the columns, among $3 (a text array), of table $1.$2 that Postgres fills
// for existing rows without writing those rows to the WAL: a column added with a default (kept
// as the "missing value" of old rows, or written by a table rewrite for a volatile default), an
// identity column (GENERATED ALWAYS or BY DEFAULT AS IDENTITY: the rewrite numbers every row,
// and atthasdef stays false), a generated column (its expression is the default), and a column
// of a domain that has a default (the domain's default fills the rows; the column has none).
const defaultsQuery = `SELECT a.attname FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
WHERE n.nspname = $1 AND c.relname = $2 AND a.attname = ANY($3::text[])
  AND NOT a.attisdropped
  AND (a.atthasdef OR a.atthasmissing OR a.attidentity <> '' OR a.attgenerated <> ''
       OR (t.typtype = 'd' AND t.typdefaultbin IS NOT NULL))
ORDER BY a.attnum`

// ColumnsWithDefaults returns those of cols, columns of table just added to it, that hold a
// value for the rows that existed before: ALTER TABLE ... ADD COLUMN ... DEFAULT, ... GENERATED
// ... AS IDENTITY, ... GENERATED ALWAYS AS (expr) STORED, or a column of a domain with a
// default (defaultsQuery). Logical replication never carries those values: a sink that only
// follows the stream would hold NULL there for every row not changed since, so the caller must
// backfill the table again.
func (f *Fetcher) ColumnsWithDefaults(ctx context.Context, table batch.TableName, cols []string) ([]string, error) {
	if len(cols) == 0 {
		return nil, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return nil, fmt.Errorf("reading the defaults of table %s: fetcher is closed", table)
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = `"` + strings.ReplaceAll(strings.ReplaceAll(c, `\`, `\\`), `"`, `\"`) + `"`
	}
	params := [][]byte{[]byte(table.Schema), []byte(table.Name), []byte("{" + strings.Join(quoted, ",") + "}")}
	rr := f.conn.ExecParams(ctx, defaultsQuery, params, nil, nil, nil)
	var out []string
	for rr.NextRow() {
		out = append(out, string(rr.Values()[0]))
	}
	if _, err := rr.Close(); err != nil {
		return nil, fmt.Errorf("reading the defaults of the columns %v added to table %s: %w", cols, table, err)
	}
	return out, nil
}
