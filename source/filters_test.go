package source

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
)

// TestPartitionedTableStreamsThroughRoot replicates a partitioned table as one table: the
// backfill reads the root (every partition), and every change of every partition, those of a
// partition created and one attached while the reader runs included, arrives as the root's.
// An update of the partition key that moves a row to another partition leaves one row.
func TestPartitionedTableStreamsThroughRoot(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		`CREATE TABLE ev (id bigint, region text NOT NULL, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`,
		`CREATE TABLE ev_eu PARTITION OF ev FOR VALUES IN ('eu')`,
		`CREATE TABLE ev_us PARTITION OF ev FOR VALUES IN ('us')`,
		`INSERT INTO ev SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, 'v' || g FROM generate_series(1, 50) g`)
	cfg := db.config(t, "ev")
	info := setup(t, cfg)
	if got := info.Schemas[0].KeyIndexes(); len(got) != 2 {
		t.Fatalf("key of ev: got columns %v, want (id, region)", got)
	}
	ctx := context.Background()
	snap, err := OpenSnapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rows := rowMap{}
	rows.apply(t, info.Schemas[0].KeyIndexes(), readAll(t, snap, info.Schemas[0], 7))
	_ = snap.Close(ctx)
	if len(rows) != 50 {
		t.Fatalf("the backfill through the root read %d rows, want 50", len(rows))
	}
	db.exec(t, `UPDATE ev SET region = 'us', v = 'moved' WHERE id = 2`) // eu -> us
	db.exec(t, `CREATE TABLE ev_ap PARTITION OF ev FOR VALUES IN ('ap')`)
	db.exec(t, `INSERT INTO ev VALUES (100, 'ap', 'new partition')`)
	db.exec(t, `CREATE TABLE ev_sa (LIKE ev INCLUDING ALL)`)
	db.exec(t, `ALTER TABLE ev ATTACH PARTITION ev_sa FOR VALUES IN ('sa')`)
	db.exec(t, `INSERT INTO ev VALUES (101, 'sa', 'attached')`)
	db.exec(t, `UPDATE ev SET region = 'sa' WHERE id = 4`) // eu -> attached partition
	db.exec(t, `DELETE FROM ev WHERE id = 5`)
	evs := stream(t, cfg, info.Schemas, db.walLSN(t))
	for _, ev := range evs {
		if c, ok := ev.(*ChangeEvent); ok && c.Table.String() != "public.ev" {
			t.Errorf("a change arrived as table %s's, not the root's", c.Table)
		}
		if s, ok := ev.(*SchemaEvent); ok {
			t.Errorf("schema event for %s: %+v", s.Table, s)
		}
	}
	changes := changesOf(evs, "public.ev")
	var ops []string
	for _, c := range changes {
		if strings.HasPrefix(string(c.Values[0].Text), "2") && len(c.Values[0].Text) == 1 {
			ops = append(ops, c.Op.String())
		}
	}
	t.Logf("the move of id 2 between partitions arrived as %v", ops)
	rows.apply(t, info.Schemas[0].KeyIndexes(), changes)
	if d := rows.diff(db.tableRows(t, info.Schemas[0])); d != "" {
		t.Errorf("the root's changes applied to its backfill differ from the table:\n%s", d)
	}
}

// TestRowFilterStreamsRowsInAndOut replicates a table with a row filter: the backfill reads the
// rows it keeps, an update that makes a row leave the filter arrives as its delete and one that
// makes a row enter it as its insert, so that applying the stream leaves exactly SELECT ... WHERE
// filter. The column list leaves out a column, which never arrives.
func TestRowFilterStreamsRowsInAndOut(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		`CREATE TABLE acc (id int PRIMARY KEY, status text NOT NULL, n int, secret text)`,
		// The filter reads status: the replica identity must carry it.
		`CREATE UNIQUE INDEX acc_id_status ON acc (id, status)`,
		`ALTER TABLE acc REPLICA IDENTITY USING INDEX acc_id_status`,
		`INSERT INTO acc SELECT g, CASE WHEN g % 3 = 0 THEN 'closed' ELSE 'open' END, g, 's' || g FROM generate_series(1, 30) g`)
	const where = "status <> 'closed'"
	cfg := db.config(t, "acc")
	cfg.Tables[0].Where = where
	cfg.Tables[0].ExcludeColumns = []string{"secret"}
	info := setup(t, cfg)
	schema := info.Schemas[0]
	if slices.ContainsFunc(schema.Columns, func(c batch.Column) bool { return c.Name == "secret" }) {
		t.Fatalf("the schema holds the excluded column: %+v", schema.Columns)
	}
	ctx := context.Background()
	snap, err := OpenSnapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rows := rowMap{}
	rows.apply(t, schema.KeyIndexes(), readAll(t, snap, schema, 4))
	_ = snap.Close(ctx)
	if d := rows.diff(db.tableRowsWhere(t, schema, where)); d != "" || len(rows) != 20 {
		t.Fatalf("the backfill read %d rows, want the 20 the filter keeps:\n%s", len(rows), d)
	}
	db.exec(t, `UPDATE acc SET status = 'closed' WHERE id IN (1, 2)`) // leave the filter
	db.exec(t, `UPDATE acc SET status = 'open', n = -3 WHERE id = 3`) // enter it
	db.exec(t, `UPDATE acc SET n = n + 100 WHERE id = 4`)             // stay in it
	db.exec(t, `UPDATE acc SET n = -6 WHERE id = 6`)                  // stay out of it
	db.exec(t, `BEGIN; UPDATE acc SET status = 'closed' WHERE id = 5; UPDATE acc SET status = 'open' WHERE id = 5; COMMIT`)
	db.exec(t, `INSERT INTO acc VALUES (31, 'closed', 31, 'x'), (32, 'open', 32, 'y')`)
	db.exec(t, `DELETE FROM acc WHERE id IN (7, 9)`) // one in, one out of the filter
	evs := stream(t, cfg, info.Schemas, db.walLSN(t))
	changes := changesOf(evs, "public.acc")
	byID := map[string][]string{}
	for _, c := range changes {
		if len(c.Values) != len(schema.Columns) {
			t.Fatalf("a %s change carries %d values, the schema %d columns", c.Op, len(c.Values), len(schema.Columns))
		}
		id := string(c.Values[0].Text)
		byID[id] = append(byID[id], c.Op.String())
	}
	for _, w := range []struct {
		id  string
		ops []string
	}{{"1", []string{"delete"}}, {"3", []string{"insert"}}, {"4", []string{"update"}}, {"6", nil}, {"9", nil}} {
		if !slices.Equal(byID[w.id], w.ops) {
			t.Errorf("id %s: got %v, want %v", w.id, byID[w.id], w.ops)
		}
	}
	rows.apply(t, schema.KeyIndexes(), changes)
	if d := rows.diff(db.tableRowsWhere(t, schema, where)); d != "" {
		t.Errorf("the stream applied to the backfill differs from SELECT ... WHERE %s:\n%s", where, d)
	}
}

// TestFilterAndPartitionPreflight checks what preflight says about partitioned tables, column
// lists and row filters, and that a publication matching the config passes.
func TestFilterAndPartitionPreflight(t *testing.T) {
	t.Parallel()
	ddl := []string{
		`CREATE TABLE t (id int PRIMARY KEY, status text NOT NULL, n int, secret text)`,
		`CREATE TABLE full_t (id int PRIMARY KEY, status text NOT NULL, n int)`,
		`ALTER TABLE full_t REPLICA IDENTITY FULL`,
		`CREATE TABLE ev (id bigint, region text NOT NULL, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`,
		`CREATE TABLE ev_eu PARTITION OF ev FOR VALUES IN ('eu')`,
		`CREATE TABLE ev_us PARTITION OF ev FOR VALUES IN ('us')`,
	}
	type table struct {
		name, where        string
		key, cols, exclude []string
	}
	tests := []struct {
		name   string
		tables []table
		pub    string   // CREATE PUBLICATION %s ... (empty: none, Setup creates it)
		want   []string // "subject: message part"; none: preflight passes
	}{
		{name: "partitioned table", tables: []table{{name: "ev"}}},
		{name: "a partition alone", tables: []table{{name: "ev_eu"}}},
		{name: "a root and its partition", tables: []table{{name: "ev"}, {name: "ev_us"}},
			want: []string{"table public.ev_us: is a partition of public.ev"}},
		{name: "partitioned without publish_via_partition_root", tables: []table{{name: "ev"}},
			pub:  "FOR TABLE ev",
			want: []string{"publication: SET (publish_via_partition_root = true)"}},
		{name: "a partition published through a root the publication holds", tables: []table{{name: "ev_eu"}},
			pub:  "FOR TABLE ev WITH (publish_via_partition_root = true)",
			want: []string{"publication: would receive none"}},
		{name: "configured key without the partition key", tables: []table{{name: "ev", key: []string{"id"}}},
			want: []string{"table public.ev: does not contain the partition key", "table public.ev: (id, region) of index ev_pkey"}},
		{name: "column list and row filter on the key", tables: []table{{name: "t", cols: []string{"id", "status"}, where: "id > 10"}}},
		{name: "matching publication", tables: []table{{name: "t", exclude: []string{"secret"}, where: "id > 10"}},
			pub: "FOR TABLE t (id, status, n) WHERE (id > 10) WITH (publish_via_partition_root = true)"},
		{name: "row filter outside the replica identity", tables: []table{{name: "t", where: "status = 'open'"}},
			want: []string{"table public.t: reads column status, which is not in the table's replica identity"}},
		{name: "row filter with replica identity full", tables: []table{{name: "full_t", where: "status = 'open'"}}},
		{name: "column list without the key", tables: []table{{name: "t", cols: []string{"status", "n"}}},
			want: []string{"table public.t: leaves out key column id"}},
		{name: "column list with replica identity full", tables: []table{{name: "full_t", exclude: []string{"n"}}},
			want: []string{"table public.full_t: leaves out replica identity column n"}},
		{name: "unknown column", tables: []table{{name: "t", cols: []string{"id", "nope"}}},
			want: []string{`table public.t: names column "nope"`}},
		{name: "invalid row filter", tables: []table{{name: "t", where: "id > (SELECT 1)"}},
			want: []string{"table public.t: is not one Postgres accepts"}},
		{name: "publication filter differs", tables: []table{{name: "t", where: "id > 20"}},
			pub:  "FOR TABLE t WHERE (id > 10) WITH (publish_via_partition_root = true)",
			want: []string{"publication: the config asks for WHERE (id > 20)"}},
		{name: "publication filter nobody configured", tables: []table{{name: "t"}},
			pub:  "FOR TABLE t WHERE (id > 10) WITH (publish_via_partition_root = true)",
			want: []string{"publication: that the config does not ask for"}},
		{name: "publication column list differs", tables: []table{{name: "t", cols: []string{"id", "n"}}},
			pub:  "FOR TABLE t (id, status) WITH (publish_via_partition_root = true)",
			want: []string{`publication: ADD TABLE "public"."t" ("id", "n")`}},
		{name: "filter on a FOR ALL TABLES publication", tables: []table{{name: "t", where: "id > 1"}},
			pub:  "FOR ALL TABLES WITH (publish_via_partition_root = true)",
			want: []string{"publication: FOR ALL TABLES"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := newTestDB(t, ddl...)
			var names []string
			for _, tb := range tt.tables {
				names = append(names, tb.name)
			}
			cfg := db.config(t, names...)
			for i, tb := range tt.tables {
				cfg.Tables[i].Key, cfg.Tables[i].Columns, cfg.Tables[i].ExcludeColumns, cfg.Tables[i].Where = tb.key, tb.cols, tb.exclude, tb.where
			}
			if tt.pub != "" {
				db.exec(t, "CREATE PUBLICATION "+cfg.Publication+" "+tt.pub)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := Setup(ctx, cfg, slog.New(slog.DiscardHandler))
			var pe *PreflightError
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("want no problem, got %v", err)
				}
				// Set up again: the publication Setup made must match the config.
				if problems, err := Check(ctx, cfg); err != nil || len(problems) > 0 {
					t.Fatalf("preflight of the publication Setup created: %v %v", problems, err)
				}
				return
			}
			if !errors.As(err, &pe) {
				t.Fatalf("want a *PreflightError, got %v", err)
			}
			for _, w := range tt.want {
				subject, part, _ := strings.Cut(w, ": ")
				if !slices.ContainsFunc(pe.Problems, func(p Problem) bool {
					return strings.HasPrefix(p.Subject, subject) && strings.Contains(p.Message+" "+p.Fix, part) && p.Fix != ""
				}) {
					t.Errorf("no problem of %s saying %q in:\n%v", subject, part, err)
				}
			}
			if len(pe.Problems) != len(tt.want) {
				t.Errorf("want %d problems, got %d:\n%v", len(tt.want), len(pe.Problems), err)
			}
		})
	}
}
