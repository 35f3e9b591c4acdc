package source

import (
	"context"
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

// TestListStorage checks, on the real Postgres, the catalog facts the rewrite watch rests on:
// VACUUM FULL, CLUSTER and TRUNCATE give a table new storage without touching its columns'
// pg_attribute rows; ALTER COLUMN ... TYPE to the same type with USING, and int → bigint, give
// it new storage and a new pg_attribute row for the column; varchar(n) → varchar(m > n) writes
// the column's row without new storage; a snapshot keeps the storage of its moment; a partition
// detached and attached again has a new pg_inherits row.
func TestListStorage(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		`CREATE DOMAIN qty_t AS int`,
		`CREATE TABLE items (id bigint PRIMARY KEY, qty int, name varchar(10), tags text[], q qty_t)`,
		`INSERT INTO items SELECT g, g, 'x', '{a}', g FROM generate_series(1, 10) g`,
		`CREATE TABLE ev (id bigint PRIMARY KEY) PARTITION BY RANGE (id)`,
		`CREATE TABLE ev_a PARTITION OF ev FOR VALUES FROM (0) TO (100)`)
	cfg := db.config(t, "items", "ev")
	setup(t, cfg)
	ctx := context.Background()
	f, err := OpenFetcher(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	items, ev := batch.TableName{Schema: "public", Name: "items"}, batch.TableName{Schema: "public", Name: "ev"}
	read := func() (TableStorage, Storage) {
		t.Helper()
		all, err := f.Storage(ctx, []batch.TableName{items, ev, {Schema: "public", Name: "missing"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 || all[items].Partitioned || !all[ev].Partitioned {
			t.Fatalf("storage of items, ev and a missing table: %+v", all)
		}
		return all[items].TableStorage, all[ev]
	}
	first, evFirst := read()
	if first.OID == 0 || first.RelFileNode == 0 || len(first.Columns) != 5 {
		t.Fatalf("storage of items: %+v, want its OID, relfilenode and 5 columns", first)
	}
	if c := first.Columns[3]; c.Name != "tags" || c.ElemOID != 25 {
		t.Errorf("tags: %+v, want an array of text (elem 25)", c)
	}
	if c := first.Columns[4]; c.Name != "q" || c.TypeOID != 23 {
		t.Errorf("q: %+v, want the domain resolved to int4", c)
	}
	if len(evFirst.Partitions) != 1 || evFirst.Partitions[0].Attached == 0 || evFirst.RelFileNode != 0 {
		t.Fatalf("storage of ev: %+v, want one partition with its pg_inherits xmin and no storage of its own", evFirst)
	}
	snap, err := OpenSnapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	prev := first
	for _, tc := range []struct {
		sql     string
		rewrite bool
		changed string // the column whose pg_attribute row changes, "" for none
	}{
		{`VACUUM FULL items`, true, ""},
		{`CLUSTER items USING items_pkey`, true, ""},
		{`ALTER TABLE items ALTER COLUMN qty TYPE int USING qty * 2`, true, "qty"},
		{`ALTER TABLE items ALTER COLUMN name TYPE varchar(20)`, false, "name"},
		{`ALTER TABLE items ALTER COLUMN qty TYPE bigint`, true, "qty"},
		{`TRUNCATE items`, true, ""},
	} {
		db.exec(t, tc.sql)
		cur, _ := read()
		if cur.OID != prev.OID || (cur.RelFileNode != prev.RelFileNode) != tc.rewrite {
			t.Errorf("%s: storage %d → %d (OID %d → %d), want rewritten %v", tc.sql, prev.RelFileNode, cur.RelFileNode, prev.OID, cur.OID, tc.rewrite)
		}
		for i, c := range cur.Columns {
			if changed := c.Xmin != prev.Columns[i].Xmin; changed != (c.Name == tc.changed) {
				t.Errorf("%s: column %s's pg_attribute xmin %d → %d, want changed %v", tc.sql, c.Name, prev.Columns[i].Xmin, c.Xmin, c.Name == tc.changed)
			}
		}
		prev = cur
	}
	under, err := snap.Storage(ctx, []batch.TableName{items})
	if err != nil {
		t.Fatal(err)
	}
	if got := under[items].TableStorage; got.RelFileNode != first.RelFileNode || got.Columns[1].Xmin != first.Columns[1].Xmin {
		t.Errorf("storage under the snapshot: %+v, want that before it: %+v", got, first)
	}
	db.exec(t, `ALTER TABLE ev DETACH PARTITION ev_a`)
	db.exec(t, `ALTER TABLE ev ATTACH PARTITION ev_a FOR VALUES FROM (0) TO (100)`)
	_, evNow := read()
	if p := evNow.Partitions[0]; p.OID != evFirst.Partitions[0].OID || p.RelFileNode != evFirst.Partitions[0].RelFileNode || p.Attached == evFirst.Partitions[0].Attached {
		t.Errorf("ev_a detached and attached again: %+v, was %+v; want the same storage and a new pg_inherits xmin", p, evFirst.Partitions[0])
	}
}
