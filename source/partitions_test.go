package source

import (
	"context"
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

// TestListPartitions lists a two-level partitioned table's partitions now and under a snapshot:
// the snapshot keeps the set (and storage) of its moment while partitions are detached,
// truncated and attached after it; a table that is not partitioned is absent.
func TestListPartitions(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		`CREATE TABLE ev (id bigint, region text NOT NULL, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`,
		`CREATE TABLE ev_eu PARTITION OF ev FOR VALUES IN ('eu')`,
		`CREATE TABLE ev_us PARTITION OF ev FOR VALUES IN ('us') PARTITION BY RANGE (id)`,
		`CREATE TABLE ev_us_1 PARTITION OF ev_us FOR VALUES FROM (0) TO (100)`,
		`CREATE TABLE plain (id bigint PRIMARY KEY)`,
		`INSERT INTO ev VALUES (1, 'eu'), (2, 'us')`)
	cfg := db.config(t, "ev", "plain")
	setup(t, cfg)
	ctx := context.Background()
	f, err := OpenFetcher(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	ev, plain := batch.TableName{Schema: "public", Name: "ev"}, batch.TableName{Schema: "public", Name: "plain"}
	names := func(ps []Partition) map[string]uint32 {
		m := map[string]uint32{}
		for _, p := range ps {
			m[p.Table.Name] = p.RelFileNode
		}
		return m
	}
	before, err := f.Partitions(ctx, []batch.TableName{ev, plain})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := before[plain]; ok {
		t.Errorf("table plain is listed as partitioned: %v", before)
	}
	got := names(before[ev])
	if len(got) != 3 || got["ev_us"] != 0 || got["ev_eu"] == 0 || got["ev_us_1"] == 0 {
		t.Fatalf("partitions of ev: %v, want ev_eu, ev_us (partitioned: no storage) and ev_us_1", got)
	}
	snap, err := OpenSnapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	db.exec(t, `ALTER TABLE ev DETACH PARTITION ev_us`)
	db.exec(t, `TRUNCATE ev_eu`)
	db.exec(t, `CREATE TABLE ev_ap PARTITION OF ev FOR VALUES IN ('ap')`)
	now, err := f.Partitions(ctx, []batch.TableName{ev})
	if err != nil {
		t.Fatal(err)
	}
	after := names(now[ev])
	if len(after) != 2 || after["ev_ap"] == 0 || after["ev_eu"] == got["ev_eu"] || after["ev_eu"] == 0 {
		t.Errorf("partitions of ev now: %v, want ev_eu with new storage (was %d) and ev_ap", after, got["ev_eu"])
	}
	under, err := snap.Partitions(ctx, []batch.TableName{ev})
	if err != nil {
		t.Fatal(err)
	}
	if u := names(under[ev]); len(u) != 3 || u["ev_eu"] != got["ev_eu"] {
		t.Errorf("partitions of ev under the snapshot: %v, want those before it: %v", u, got)
	}
	// Rows written through the root after a partition joined are in the WAL: not counted. Rows a
	// table held when it was attached, or written by the attaching transaction, are.
	db.exec(t, `INSERT INTO ev VALUES (3, 'ap')`)
	db.exec(t, `CREATE TABLE ev_af (LIKE ev)`)
	db.exec(t, `ALTER TABLE ev ATTACH PARTITION ev_af FOR VALUES IN ('af')`)
	db.exec(t, `INSERT INTO ev VALUES (4, 'af')`)
	db.exec(t, `CREATE TABLE ev_sa (LIKE ev)`)
	db.exec(t, `INSERT INTO ev_sa VALUES (5, 'sa')`)
	db.exec(t, `ALTER TABLE ev ATTACH PARTITION ev_sa FOR VALUES IN ('sa')`)
	db.exec(t, `BEGIN; CREATE TABLE ev_oc (LIKE ev); INSERT INTO ev_oc VALUES (6, 'oc'); ALTER TABLE ev ATTACH PARTITION ev_oc FOR VALUES IN ('oc'); COMMIT`)
	for _, tc := range []struct {
		name  string
		where string
		want  bool
	}{
		{"ev_eu", "", false},       // truncated
		{"ev_us", "", true},        // detached: every row counts
		{"ev_us", "id > 5", false}, // ... that the filter keeps
		{"ev_ap", "", false},       // created as a partition, filled since through the root
		{"ev_af", "", false},       // attached empty, filled since through the root
		{"ev_sa", "", true},        // attached holding a row
		{"ev_sa", "region = 'x'", false},
		{"ev_oc", "", true}, // filled and attached by one transaction
	} {
		has, err := f.PartitionHasRows(ctx, batch.TableName{Schema: "public", Name: tc.name}, tc.where)
		if err != nil || has != tc.want {
			t.Errorf("PartitionHasRows(%s, %q) = %v, %v; want %v", tc.name, tc.where, has, err, tc.want)
		}
	}
}
