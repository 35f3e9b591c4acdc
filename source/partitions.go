package source

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicecdc/sluice/batch"
)

// Partition is one partition of a partitioned table, at any depth, as the catalog shows it.
type Partition struct {
	Table batch.TableName `json:"table"`
	OID   uint32          `json:"oid"`
	// RelFileNode is the partition's storage (pg_class.relfilenode): TRUNCATE, VACUUM FULL,
	// CLUSTER and table rewrites give it a new one; 0 for a partition that is itself partitioned.
	RelFileNode uint32 `json:"relfilenode"`
	// Attached is the xmin of the partition's pg_inherits row: the transaction that created it
	// as a partition or last attached it (a DETACH deletes the row, an ATTACH writes a new one).
	// 0 when unknown (a record of an older release).
	Attached uint32 `json:"attached,omitempty"`
}

// partitionsSQL lists the partitions, at every depth, of the tables among $1 (quoted names)
// that are partitioned: one row per root with its own oid (the root's row, so a root without
// partitions is listed), then one per partition. It reads pg_inherits and pg_class by SQL, so
// under an imported snapshot it shows the catalog of the snapshot (pg_partition_tree reads the
// latest catalog instead).
const partitionsSQL = `
WITH RECURSIVE tree(root, relid, attached) AS (
  SELECT c.oid, c.oid, '0'::text FROM pg_catalog.pg_class c
  WHERE c.relkind = 'p' AND c.oid IN (SELECT to_regclass(x) FROM unnest($1::text[]) AS x)
  UNION ALL
  SELECT t.root, i.inhrelid, i.xmin::text FROM tree t JOIN pg_catalog.pg_inherits i ON i.inhparent = t.relid
)
SELECT rn.nspname, r.relname, n.nspname, c.relname, c.oid::text, c.relfilenode::text, t.attached
FROM tree t
JOIN pg_catalog.pg_class r ON r.oid = t.root JOIN pg_catalog.pg_namespace rn ON rn.oid = r.relnamespace
JOIN pg_catalog.pg_class c ON c.oid = t.relid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace`

// ListPartitions returns the partitions of each of tables that is a partitioned table (the
// others are absent from the result; a partitioned table without partitions maps to an empty,
// non-nil list), ordered by OID.
func ListPartitions(ctx context.Context, conn *pgconn.PgConn, tables []batch.TableName) (map[batch.TableName][]Partition, error) {
	res := conn.ExecParams(ctx, partitionsSQL, [][]byte{[]byte(tableArray(tables))}, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, fmt.Errorf("listing the partitions of the partitioned tables: %w", res.Err)
	}
	out := map[batch.TableName][]Partition{}
	for _, row := range res.Rows {
		root := batch.TableName{Schema: string(row[0]), Name: string(row[1])}
		p := Partition{Table: batch.TableName{Schema: string(row[2]), Name: string(row[3])}}
		oid, err1 := strconv.ParseUint(string(row[4]), 10, 32)
		node, err2 := strconv.ParseUint(string(row[5]), 10, 32)
		attached, err3 := strconv.ParseUint(string(row[6]), 10, 32)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("listing the partitions of table %s: bad oid %q, relfilenode %q or pg_inherits xmin %q", root, row[4], row[5], row[6])
		}
		p.OID, p.RelFileNode, p.Attached = uint32(oid), uint32(node), uint32(attached)
		if _, ok := out[root]; !ok {
			out[root] = []Partition{}
		}
		if p.Table == root {
			continue
		}
		out[root] = append(out[root], p)
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b Partition) int { return cmp.Compare(a.OID, b.OID) })
	}
	return out, nil
}

// tableArray is a Postgres text array literal of tables' quoted names (for to_regclass).
func tableArray(tables []batch.TableName) string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = quoteTable(t)
	}
	return textArray(names)
}

// textArray is a Postgres text array literal of items.
func textArray(items []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// partitionHasRows reports whether partition holds a row that where (a row filter in SQL, ""
// for none) keeps and that the WAL may not carry: one written before the partition joined its
// parent, or by the transaction that attached it. A partition that is itself partitioned is read
// with its partitions.
//
// A row's xmin against the xmin of the partition's pg_inherits row (the transaction that created
// it as a partition or attached it) tells them apart: a row written by a later transaction went
// through the partitioned table and is in the WAL (published via the root), so a partition created
// ahead of time and filled since needs no resync, however soon the next check comes. A row of the
// attaching transaction or older is counted, and so is one whose xmin's age is negative (a frozen
// row older than 2^31 transactions, whose raw xmin wrapped around). The residue: an old table whose
// every row was written between 2^32 and 2^32 + (the attach's age) transactions before the check
// would read as written after the attach (the check runs every few seconds, so that window is the
// transactions of those seconds). A table that is not a partition (detached) counts every row.
func partitionHasRows(ctx context.Context, conn *pgconn.PgConn, partition batch.TableName, where string) (bool, error) {
	joined := "(SELECT pg_catalog.age(i.xmin) FROM pg_catalog.pg_inherits i WHERE i.inhrelid = " +
		quoteLiteral(quoteTable(partition)) + "::regclass)"
	sql := "SELECT EXISTS (SELECT 1 FROM " + quoteTable(partition) +
		" WHERE (pg_catalog.age(xmin) >= coalesce(" + joined + ", -1) OR pg_catalog.age(xmin) < 0)"
	if where != "" {
		sql += " AND (" + where + ")"
	}
	sql += ")"
	res := conn.ExecParams(ctx, sql, nil, nil, nil, nil).Read()
	if res.Err != nil {
		return false, fmt.Errorf("checking whether partition %s holds rows that predate it: %w", partition, res.Err)
	}
	if len(res.Rows) != 1 {
		return false, fmt.Errorf("checking whether partition %s holds rows that predate it: want 1 row, got %d", partition, len(res.Rows))
	}
	return string(res.Rows[0][0]) == "t", nil
}

// Partitions lists the partitions of tables (ListPartitions) on the fetcher's connection: the
// catalog as it is now.
func (f *Fetcher) Partitions(ctx context.Context, tables []batch.TableName) (map[batch.TableName][]Partition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return nil, fmt.Errorf("listing partitions: the fetcher is closed")
	}
	return ListPartitions(ctx, f.conn, tables)
}

// PartitionHasRows reports whether partition holds a row that where keeps ("" for every row).
func (f *Fetcher) PartitionHasRows(ctx context.Context, partition batch.TableName, where string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return false, fmt.Errorf("checking partition %s: the fetcher is closed", partition)
	}
	return partitionHasRows(ctx, f.conn, partition, where)
}

// Partitions lists the partitions of tables as they were when the snapshot was taken: the set
// a backfill from it corresponds to.
func (s *Snapshot) Partitions(ctx context.Context, tables []batch.TableName) (map[batch.TableName][]Partition, error) {
	conn, put, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing partitions: %w", err)
	}
	defer put()
	return ListPartitions(ctx, conn, tables)
}
