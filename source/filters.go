package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicecdc/sluice/batch"
)

// This file holds what a table's place in a publication depends on beyond its columns and key:
// partitioning (a partitioned table is published through its root, publish_via_partition_root)
// and the column lists and row filters of tables[].columns, exclude_columns and where.

// readPartitioning fills in the partitioned tables t is a partition of and, for a partitioned
// table, its partition key.
func readPartitioning(ctx context.Context, q querier, oid uint32, ti *tableInfo) error {
	rows, err := q.Query(ctx, `
SELECT n.nspname, c.relname FROM pg_catalog.pg_partition_ancestors($1) WITH ORDINALITY AS a(relid, ord)
JOIN pg_catalog.pg_class c ON c.oid = a.relid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE a.relid <> $1 ORDER BY a.ord`, oid)
	if err != nil {
		return fmt.Errorf("reading the partition ancestors of table %s: %w", ti.Name, err)
	}
	ti.Ancestors, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (batch.TableName, error) {
		var t batch.TableName
		err := r.Scan(&t.Schema, &t.Name)
		return t, err
	})
	if err != nil {
		return fmt.Errorf("reading the partition ancestors of table %s: %w", ti.Name, err)
	}
	if ti.Kind != "p" {
		return nil
	}
	rows, err = q.Query(ctx, `
SELECT coalesce(a.attname::text, '') FROM pg_catalog.pg_partitioned_table p
CROSS JOIN LATERAL unnest(p.partattrs::int2[]) WITH ORDINALITY AS k(attnum, ord)
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k.attnum
WHERE p.partrelid = $1 ORDER BY k.ord`, oid)
	if err != nil {
		return fmt.Errorf("reading the partition key of table %s: %w", ti.Name, err)
	}
	if ti.PartKey, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return fmt.Errorf("reading the partition key of table %s: %w", ti.Name, err)
	}
	return nil
}

// publishedColumns returns the columns of cols that tc replicates, in table order: those named
// by tc.Columns, or all but tc.ExcludeColumns, or all.
func publishedColumns(cols []attr, tc TableConfig) []attr {
	if len(tc.Columns) == 0 && len(tc.ExcludeColumns) == 0 {
		return cols
	}
	out := make([]attr, 0, len(cols))
	for _, a := range cols {
		if len(tc.Columns) > 0 && !slices.Contains(tc.Columns, a.Name) || slices.Contains(tc.ExcludeColumns, a.Name) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// columnListOf returns the publication column list tc asks for on t (table order), or nil when
// every column is published.
func columnListOf(t tableInfo, tc TableConfig) []string {
	if len(tc.Columns) == 0 && len(tc.ExcludeColumns) == 0 {
		return nil
	}
	var names []string
	for _, a := range publishedColumns(t.Columns, tc) {
		names = append(names, a.Name)
	}
	return names
}

// pubTable is the publication's table clause for t: the quoted name, the column list and the
// row filter that tc asks for (ALTER PUBLICATION ... ADD TABLE takes it).
func pubTable(t tableInfo, tc TableConfig) string {
	s := quoteTable(t.Name)
	if cols := columnListOf(t, tc); cols != nil {
		q := make([]string, len(cols))
		for i, c := range cols {
			q[i] = quoteIdent(c)
		}
		s += " (" + strings.Join(q, ", ") + ")"
	}
	if tc.Where != "" {
		s += " WHERE (" + tc.Where + ")"
	}
	return s
}

// identityColumns returns the columns of t's replica identity (every column for FULL).
func identityColumns(t tableInfo) []string {
	switch t.Identity {
	case "f":
		names := make([]string, len(t.Columns))
		for i, a := range t.Columns {
			names[i] = a.Name
		}
		return names
	case "i":
		return t.IdentIdx
	case "n":
		return nil
	default:
		return t.PK
	}
}

// rowFilter is a configured row filter as the server understands it.
type rowFilter struct {
	Expr    string   // the filter as pg_get_expr prints it, the form pg_publication_rel holds
	Columns []string // the columns it reads
	Checked bool     // Expr and Columns come from the server (false: the role could not ask)
}

// varattnoRE finds the column references in a stored expression tree (pg_node_tree text).
var varattnoRE = regexp.MustCompile(`:varattno (\d+)`)

// normalizeWhere asks the server what tc.Where means on table t: it creates a publication with
// the filter in a transaction that it rolls back (nothing is kept), and reads the filter back in
// its stored form, with the columns it reads. A filter the server refuses is a Problem. A role
// that may not create publications or does not own t gets the filter as written, unchecked.
func normalizeWhere(ctx context.Context, conn *pgx.Conn, t tableInfo, tc TableConfig) (rowFilter, *Problem, error) {
	f := rowFilter{Expr: tc.Where}
	if tc.Where == "" {
		return f, nil, nil
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return f, nil, fmt.Errorf("checking the row filter of table %s: %w", t.Name, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := "sluice_check_" + hex.EncodeToString(suffix[:])
	_, err = tx.Exec(ctx, fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WHERE (%s)", quoteIdent(tmp), quoteTable(t.Name), tc.Where))
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
		if pe.Code == "42501" { // insufficient_privilege
			return f, nil, nil
		}
		return f, &Problem{Subject: "table " + t.Name.String(),
			Message: fmt.Sprintf("its row filter (tables[].where: %s) is not one Postgres accepts in a publication: %s", tc.Where, pe.Message),
			Fix:     "fix tables[].where: a boolean expression over the table's columns using only built-in immutable functions and operators (no subqueries, user-defined functions or system columns)"}, nil
	}
	if err != nil {
		return f, nil, fmt.Errorf("checking the row filter of table %s: %w", t.Name, err)
	}
	var tree string
	err = tx.QueryRow(ctx, `
SELECT pg_catalog.pg_get_expr(r.prqual, r.prrelid), r.prqual::text
FROM pg_catalog.pg_publication_rel r JOIN pg_catalog.pg_publication p ON p.oid = r.prpubid WHERE p.pubname = $1`, tmp).Scan(&f.Expr, &tree)
	if err != nil {
		return f, nil, fmt.Errorf("reading back the row filter of table %s: %w", t.Name, err)
	}
	var nums []int16
	for _, m := range varattnoRE.FindAllStringSubmatch(tree, -1) {
		if n, err := strconv.ParseInt(m[1], 10, 16); err == nil && !slices.Contains(nums, int16(n)) {
			nums = append(nums, int16(n))
		}
	}
	rows, err := tx.Query(ctx, `SELECT attname::text FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass AND attnum = ANY($2) ORDER BY attnum`,
		quoteTable(t.Name), nums)
	if err != nil {
		return f, nil, fmt.Errorf("reading the columns of the row filter of table %s: %w", t.Name, err)
	}
	if f.Columns, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return f, nil, fmt.Errorf("reading the columns of the row filter of table %s: %w", t.Name, err)
	}
	f.Checked = true
	return f, nil, nil
}

// filterProblems checks tc's column list and row filter against t: the named columns exist, the
// list keeps the key and the replica identity (Postgres refuses UPDATE and DELETE on a table
// whose published column list or row filter reaches outside its replica identity), and a
// partitioned table's key holds its partition key.
func filterProblems(t tableInfo, tc TableConfig, where rowFilter) []Problem {
	subject := "table " + t.Name.String()
	var ps []Problem
	for _, list := range []struct {
		key   string
		names []string
	}{{"tables[].columns", tc.Columns}, {"tables[].exclude_columns", tc.ExcludeColumns}} {
		for _, c := range list.names {
			if _, ok := t.hasColumn(c); !ok {
				ps = append(ps, Problem{Subject: subject, Message: fmt.Sprintf("%s names column %q, which the table does not have", list.key, c),
					Fix: "fix " + list.key + " in the pipeline config (names are case-sensitive; generated columns are never replicated)"})
			}
		}
	}
	if cols := columnListOf(t, tc); cols != nil {
		var missing []string
		for _, need := range []struct {
			what  string
			names []string
		}{{"key column", keyColumns(t, tc.Key)}, {"replica identity column", identityColumns(t)}} {
			for _, c := range need.names {
				if _, ok := t.hasColumn(c); ok && !slices.Contains(cols, c) && !slices.Contains(missing, c) {
					missing = append(missing, c)
					ps = append(ps, Problem{Subject: subject,
						Message: fmt.Sprintf("its column list leaves out %s %s: rows could not be addressed (and Postgres refuses UPDATE and DELETE on a table whose published columns miss its replica identity)", need.what, c),
						Fix:     fmt.Sprintf("add %s to tables[].columns (or remove it from tables[].exclude_columns)", c)})
				}
			}
		}
	}
	if where.Checked && t.Identity != "f" {
		identity := identityColumns(t)
		for _, c := range where.Columns {
			if !slices.Contains(identity, c) {
				ps = append(ps, Problem{Subject: subject,
					Message: fmt.Sprintf("its row filter reads column %s, which is not in the table's replica identity (%s): Postgres would refuse every UPDATE and DELETE of the table, and an update could not tell whether the row left the filter", c, strings.Join(identity, ", ")),
					Fix:     fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY FULL (or USING INDEX on a unique index containing %s), or filter on key columns only", quoteTable(t.Name), c)})
			}
		}
	}
	if t.Kind == "p" && len(tc.Key) > 0 && !covers(tc.Key, t.PartKey) {
		ps = append(ps, Problem{Subject: subject,
			Message: fmt.Sprintf("is partitioned by (%s), but the configured key (%s) does not contain the partition key: a key is unique across partitions only when it does", strings.Join(t.PartKey, ", "), strings.Join(tc.Key, ", ")),
			Fix:     "add the partition key's columns to tables[].key, or remove tables[].key to use the primary key"})
	}
	return ps
}

// partitionProblems checks how a partition (a table with ancestors) or a partitioned table is
// configured: never both a partitioned table and one of its partitions in one pipeline (their
// rows would be replicated twice, and with publish_via_partition_root the partition's changes
// arrive as the root's), and a partition replicated alone must not be published through a
// root the publication holds.
func partitionProblems(name string, p publication, t tableInfo, configured map[batch.TableName]bool) []Problem {
	subject := "table " + t.Name.String()
	var ps []Problem
	for _, a := range t.Ancestors {
		if configured[a] {
			ps = append(ps, Problem{Subject: subject,
				Message: fmt.Sprintf("is a partition of %s, which the pipeline also replicates: its rows would be replicated twice, and its changes arrive as %s's", a, a),
				Fix:     fmt.Sprintf("remove %s or %s from the pipeline's tables (a partitioned table's target receives the rows of all its partitions)", t.Name, a)})
			continue
		}
		if _, ok := p.Tables[a.String()]; p.Exists && p.ViaRoot && (ok || p.AllTables) {
			ps = append(ps, Problem{Subject: "publication " + name,
				Message: fmt.Sprintf("publishes %s through its partition root (publish_via_partition_root) and holds %s: the changes of %s arrive as %s's and table %s would receive none", t.Name, a, t.Name, a, t.Name),
				Fix:     fmt.Sprintf("ALTER PUBLICATION %s DROP TABLE %s, or replicate %s instead of %s", quoteIdent(name), quoteTable(a), a, t.Name)})
		}
	}
	return ps
}

// publicationFilterProblems checks that the publication publishes t as tc asks: through its
// root when t is partitioned, and with the column list and row filter of the config (none when
// the config has none: a filter nobody configured would skip rows silently).
func publicationFilterProblems(name string, p publication, t tableInfo, tc TableConfig, where rowFilter) []Problem {
	if !p.Exists {
		return nil
	}
	subject := "publication " + name
	var ps []Problem
	if t.Kind == "p" && !p.ViaRoot {
		ps = append(ps, Problem{Subject: subject,
			Message: fmt.Sprintf("does not publish partitioned table %s through its root: its partitions' changes would arrive under their own names, not as %s's", t.Name, t.Name),
			Fix:     fmt.Sprintf("ALTER PUBLICATION %s SET (publish_via_partition_root = true)", quoteIdent(name))})
	}
	if p.AllTables {
		if tc.filtered() {
			ps = append(ps, Problem{Subject: subject,
				Message: fmt.Sprintf("is FOR ALL TABLES, which cannot carry the column list or row filter configured for table %s", t.Name),
				Fix:     "choose another source.publication (Sluice creates it FOR TABLE the pipeline's tables), or remove tables[].columns, exclude_columns and where"})
		}
		return ps
	}
	rel, ok := p.Tables[t.Name.String()]
	if !ok {
		return ps
	}
	fix := fmt.Sprintf("BEGIN; ALTER PUBLICATION %[1]s DROP TABLE %[2]s; ALTER PUBLICATION %[1]s ADD TABLE %[3]s; COMMIT;", quoteIdent(name), quoteTable(t.Name), pubTable(t, tc))
	switch want := columnListOf(t, tc); {
	case want == nil && rel.Columns != nil:
		ps = append(ps, Problem{Subject: subject, Message: fmt.Sprintf("has a column list on table %s (%s) that the config does not ask for: unlisted columns would be missing", t.Name, strings.Join(rel.Columns, ", ")),
			Fix: fix + " (or set tables[].columns to match)"})
	case want != nil && !slices.Equal(want, rel.Columns):
		have := "no column list (every column)"
		if rel.Columns != nil {
			have = "the column list (" + strings.Join(rel.Columns, ", ") + ")"
		}
		ps = append(ps, Problem{Subject: subject, Message: fmt.Sprintf("has %s on table %s, the config asks for (%s)", have, t.Name, strings.Join(want, ", ")),
			Fix: fix})
	}
	switch {
	case where.Expr == "" && rel.Where != "":
		ps = append(ps, Problem{Subject: subject, Message: fmt.Sprintf("has a row filter (WHERE %s) on table %s that the config does not ask for: filtered rows would be skipped silently", rel.Where, t.Name),
			Fix: fix + " (or set tables[].where to match)"})
	case where.Expr != rel.Where:
		have := "no row filter"
		if rel.Where != "" {
			have = "the row filter WHERE " + rel.Where
		}
		msg := fmt.Sprintf("has %s on table %s, the config asks for WHERE %s", have, t.Name, where.Expr)
		if !where.Checked {
			msg += " (as written: the role may not create a publication to learn the server's form of it)"
		}
		ps = append(ps, Problem{Subject: subject, Message: msg, Fix: fix})
	}
	return ps
}
