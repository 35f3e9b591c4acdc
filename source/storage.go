package source

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicecdc/sluice/batch"
)

// Storage is what the catalog says about a replicated table's rows that the WAL does not: its
// own storage (TableStorage) and, for a partitioned table, its partitions.
type Storage struct {
	TableStorage
	// Partitioned is set for a partitioned table; Partitions are its partitions at every depth,
	// ordered by OID (ListPartitions).
	Partitioned bool
	Partitions  []Partition
}

// TableStorage is a table's own entry in the catalog: its OID, its storage and a mark of each
// live column's catalog row. A rewrite of the table (pg_class.relfilenode changed) that changed
// values also changed a column's pg_attribute row (ALTER COLUMN ... TYPE updates it in the same
// transaction); VACUUM FULL, CLUSTER, pg_repack and SET TABLESPACE rewrite without touching it.
type TableStorage struct {
	OID uint32 `json:"oid"`
	// RelFileNode is the table's storage (pg_class.relfilenode); 0 for a partitioned table.
	RelFileNode uint32        `json:"relfilenode"`
	Columns     []ColumnStamp `json:"columns"`
}

// ColumnStamp marks one live column's pg_attribute row: the transaction that last wrote it
// (xmin) and the type it declares, as the retype check reads types (Widens).
type ColumnStamp struct {
	Num  int    `json:"num"` // attnum: a renamed column keeps it, a re-added one gets a new one
	Name string `json:"name"`
	// Xmin is the pg_attribute row's xmin (raw: freezing keeps it).
	Xmin    uint32 `json:"xmin"`
	TypeOID uint32 `json:"type_oid"` // a domain resolved to its base type
	TypeMod int32  `json:"type_mod"`
	Dims    int    `json:"dims,omitempty"`
	ElemOID uint32 `json:"elem_oid,omitempty"` // for arrays: the element type
}

// Column is the stamp's type as a batch.Column, for Widens.
func (c ColumnStamp) Column() batch.Column {
	return batch.Column{Name: c.Name, TypeOID: c.TypeOID, TypeMod: c.TypeMod, Dims: c.Dims, ElemOID: c.ElemOID}
}

// SameType reports whether c and o declare the same type.
func (c ColumnStamp) SameType(o ColumnStamp) bool {
	return c.TypeOID == o.TypeOID && c.TypeMod == o.TypeMod && c.Dims == o.Dims && c.ElemOID == o.ElemOID
}

// storageSQL lists, for each of the tables among $1 (quoted names), its OID and relfilenode
// and one row per live column with the xmin of its pg_attribute row and its type. It reads the
// catalog by SQL, so under an imported snapshot it shows the catalog of the snapshot.
const storageSQL = `
SELECT n.nspname, c.relname, c.oid::text, c.relfilenode::text,
  a.attnum::text, a.attname, a.xmin::text,
  bt.oid::text, a.atttypmod::text, a.attndims::text,
  (CASE WHEN bt.typcategory = 'A' THEN bt.typelem ELSE 0 END)::text
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
JOIN pg_catalog.pg_type bt ON bt.oid = (CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END)
WHERE c.oid IN (SELECT to_regclass(x) FROM unnest($1::text[]) AS x)
ORDER BY c.oid, a.attnum`

// ListStorage returns the storage of each of tables that exists (the others are absent), with
// the partitions of those that are partitioned.
func ListStorage(ctx context.Context, conn *pgconn.PgConn, tables []batch.TableName) (map[batch.TableName]Storage, error) {
	res := conn.ExecParams(ctx, storageSQL, [][]byte{[]byte(tableArray(tables))}, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, fmt.Errorf("reading the storage of the replicated tables: %w", res.Err)
	}
	out := map[batch.TableName]Storage{}
	for _, row := range res.Rows {
		name := batch.TableName{Schema: string(row[0]), Name: string(row[1])}
		var n [7]uint64
		for i, f := range [][]byte{row[2], row[3], row[4], row[6], row[7], row[9], row[10]} {
			v, err := strconv.ParseUint(string(f), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("reading the storage of table %s: bad number %q", name, f)
			}
			n[i] = v
		}
		mod, err := strconv.ParseInt(string(row[8]), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("reading the storage of table %s: bad typmod %q", name, row[8])
		}
		st := out[name]
		st.OID, st.RelFileNode = uint32(n[0]), uint32(n[1])
		st.Columns = append(st.Columns, ColumnStamp{Num: int(n[2]), Name: string(row[5]), Xmin: uint32(n[3]),
			TypeOID: uint32(n[4]), TypeMod: int32(mod), Dims: int(n[5]), ElemOID: uint32(n[6])})
		out[name] = st
	}
	parts, err := ListPartitions(ctx, conn, tables)
	if err != nil {
		return nil, err
	}
	for name, ps := range parts {
		st, ok := out[name]
		if !ok {
			continue
		}
		st.Partitioned, st.Partitions = true, ps
		out[name] = st
	}
	return out, nil
}

// Storage reads the storage of tables (ListStorage) on the fetcher's connection: the catalog as
// it is now.
func (f *Fetcher) Storage(ctx context.Context, tables []batch.TableName) (map[batch.TableName]Storage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return nil, fmt.Errorf("reading table storage: the fetcher is closed")
	}
	return ListStorage(ctx, f.conn, tables)
}

// Storage reads the storage of tables as it was when the snapshot was taken: what a backfill
// from it corresponds to.
func (s *Snapshot) Storage(ctx context.Context, tables []batch.TableName) (map[batch.TableName]Storage, error) {
	conn, put, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading table storage: %w", err)
	}
	defer put()
	return ListStorage(ctx, conn, tables)
}
