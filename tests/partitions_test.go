package tests

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/failure"
)

// partitionedItemsDDL makes public.items (the columns of itemsDDL) a table partitioned by range
// of its key, in two partitions, with 20,000 rows.
var partitionedItemsDDL = []string{
	`CREATE TABLE public.items (
	id      bigint PRIMARY KEY,
	name    text NOT NULL,
	qty     int,
	price   numeric(10,2),
	tags    text[],
	updated timestamptz NOT NULL DEFAULT now()
) PARTITION BY RANGE (id)`,
	`CREATE TABLE public.items_low PARTITION OF public.items FOR VALUES FROM (MINVALUE) TO (10000)`,
	`CREATE TABLE public.items_high PARTITION OF public.items FOR VALUES FROM (10000) TO (300000)`,
	itemsSeed(1, 20000),
}

// TestPartitionedTableEverySink replicates a partitioned table as one table into every sink:
// the backfill reads all partitions through the root; while the pipeline streams, a table is
// attached as a partition and another created as one, rows move between partitions by updates
// of the partition key (both ways, into the attached partition among them), and the live
// changes of the other tests run on it. Every sink ends equal to the source key by key, each
// moved row once, under its new key.
func TestPartitionedTableEverySink(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			s := sk.open(t, pipelineOptions{SetupSQL: partitionedItemsDDL})
			s.know([2]int{1, 20000}, [2]int{400500, 400599}, [2]int{1000001, 1000100})
			s.know(liveItemKeys...)
			s.p.worker("worker")
			s.p.sluice("start")
			s.p.waitStream(itemsTable)
			s.p.exec(
				// A table attached as a partition while the pipeline streams (empty: rows a
				// table holds when it is attached are not in the WAL; docs/filters.md).
				`CREATE TABLE public.items_attached (LIKE public.items INCLUDING DEFAULTS)`,
				`ALTER TABLE public.items ATTACH PARTITION public.items_attached FOR VALUES FROM (300000) TO (1000000)`,
				// Rows move from items_low into the attached partition, and from items_high into
				// items_low, by updates of the partition key.
				`UPDATE public.items SET id = id + 400000, name = 'moved-' || id WHERE id BETWEEN 500 AND 599`,
				`DELETE FROM public.items WHERE id BETWEEN 1 AND 50`,
				`UPDATE public.items SET id = id - 19950, qty = -1 WHERE id BETWEEN 19951 AND 20000`,
				`CREATE TABLE public.items_created PARTITION OF public.items FOR VALUES FROM (1000000) TO (2000000)`,
			)
			s.p.exec(itemsSeed(1000001, 1000100))
			s.p.exec(liveItemChanges...)
			s.waitEqual()
		})
	}
}

// TestRowFilterEverySink replicates the rows of public.items that a row filter keeps
// (tables[].where: qty < 50) into every sink: the backfill copies those rows only, and updates
// that move rows out of the filter and back in, inserts and deletes on both sides of it leave
// every sink equal to SELECT ... WHERE qty < 50 on the source (a view of it), key by key.
func TestRowFilterEverySink(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			s := sk.open(t, pipelineOptions{
				SetupSQL: []string{itemsDDL, itemsSeed(1, 5000),
					// The filter reads qty: the replica identity must carry it.
					`ALTER TABLE public.items REPLICA IDENTITY FULL`,
					`CREATE VIEW public.items_filtered AS SELECT * FROM public.items WHERE qty < 50`},
				TableYAML: "    where: qty < 50\n",
			})
			s.know([2]int{1, 5000}, [2]int{200001, 200500})
			s.know(liveItemKeys...)
			s.p.worker("worker")
			s.p.sluice("start")
			s.p.waitStream(itemsTable)
			s.p.exec(
				`UPDATE public.items SET qty = qty + 50 WHERE id BETWEEN 1 AND 300 AND qty < 50`,    // out of the filter
				`UPDATE public.items SET qty = qty - 50 WHERE id BETWEEN 200 AND 600 AND qty >= 50`, // into it (some back in)
				`UPDATE public.items SET name = 'stays in' WHERE id BETWEEN 1000 AND 1100 AND qty < 50`,
				`UPDATE public.items SET name = 'stays out' WHERE id BETWEEN 1000 AND 1100 AND qty >= 50`,
				`UPDATE public.items SET qty = NULL WHERE id BETWEEN 1200 AND 1210`, // NULL: out of the filter
				`BEGIN; UPDATE public.items SET qty = 99 WHERE id = 2000; UPDATE public.items SET qty = 1 WHERE id = 2000; COMMIT`,
			)
			s.p.exec(liveItemChanges...)
			s.p.waitEqualWithin(6*time.Minute, "public.items_filtered", "id", s.columns, s.read)
		})
	}
}

// TestColumnListIceberg replicates public.items with tables[].columns: the Iceberg table has
// exactly the listed columns (and the metadata ones), and equals the source over them.
func TestColumnListIceberg(t *testing.T) {
	defer parallel(t)()
	s := itemsTarget(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 5000)},
		TableYAML: "    columns: [id, name, qty]\n"}, icebergDestination(t))
	s.p.worker("worker")
	s.p.sluice("start")
	s.p.waitStream(itemsTable)
	s.p.exec(liveItemChanges...)
	listed := []string{"name", "qty"} // the listed columns besides the key; not e2eColumns, which may hold more
	read := icebergColumnsReader(s.p, "raw.items", listed)
	s.p.waitEqualTo("public.items", "id", listed, read)
	sink := s.p.icebergSink()
	tbl := s.p.icebergTable(context.Background(), sink, "raw.items")
	var names []string
	for _, f := range tbl.Schema().Fields() {
		names = append(names, f.Name)
	}
	for _, gone := range []string{"price", "tags", "updated"} {
		if slices.Contains(names, gone) {
			t.Errorf("the Iceberg table has column %s, which tables[].columns leaves out: %v", gone, names)
		}
	}
	if !slices.Contains(names, "qty") {
		t.Errorf("the Iceberg table lacks listed column qty: %v", names)
	}
}

// partitionChangeDDL is public.items partitioned by range of id: items_low (ids 1..999) and
// items_high (1000..1500).
var partitionChangeDDL = []string{
	partitionedItemsDDL[0],
	`CREATE TABLE public.items_low PARTITION OF public.items FOR VALUES FROM (MINVALUE) TO (1000)`,
	`CREATE TABLE public.items_high PARTITION OF public.items FOR VALUES FROM (1000) TO (300000)`,
	itemsSeed(1, 1500),
}

// partitionChange is one partition change the WAL cannot show, with the partition the table's
// reaction must name.
type partitionChange struct {
	name      string
	partition string
	sql       []string
	live      []string // streamed changes after it
}

// partitionChanges are, in order: a table that holds rows attached as a partition, the same
// partition detached, a partition dropped, a partition truncated alone. Each leaves the root's
// rows changed without a row change in the WAL.
var partitionChanges = []partitionChange{
	{name: "attach with rows", partition: "public.items_full", sql: []string{
		`CREATE TABLE public.items_full (LIKE public.items INCLUDING DEFAULTS)`,
		`INSERT INTO public.items_full (id, name, qty, price, tags, updated)
			SELECT g, 'full-' || g, g % 97, 1.5, ARRAY['f'], '2026-02-01'::timestamptz FROM generate_series(300001, 300050) g`,
		`ALTER TABLE public.items ATTACH PARTITION public.items_full FOR VALUES FROM (300000) TO (400000)`,
	}, live: []string{itemsSeed(2001, 2020)}},
	{name: "detach", partition: "public.items_full", sql: []string{
		`ALTER TABLE public.items DETACH PARTITION public.items_full`,
	}, live: []string{`UPDATE public.items SET qty = -2 WHERE id BETWEEN 10 AND 20`}},
	{name: "drop", partition: "public.items_high", sql: []string{
		`DROP TABLE public.items_high`,
	}, live: []string{`DELETE FROM public.items WHERE id BETWEEN 30 AND 35`}},
	{name: "truncate one partition", partition: "public.items_low", sql: []string{
		`TRUNCATE public.items_low`,
	}, live: []string{itemsSeed(1, 10)}},
}

// TestPartitionChangesTheWALCannotShow makes, while public.items (partitioned) streams into
// Iceberg, each partition change the WAL cannot show (partitionChanges). With
// tables[].on_partition_change: resync (the default) the table resyncs by itself and the sink
// equals the source key by key after each. With stop the table fails with PartitionChanged
// naming the partition and the remedy, and `sluice resync --table` makes it equal again.
func TestPartitionChangesTheWALCannotShow(t *testing.T) {
	defer parallel(t)()
	for _, policy := range []string{"resync", "stop"} {
		t.Run(policy, func(t *testing.T) {
			defer parallel(t)()
			o := pipelineOptions{SetupSQL: partitionChangeDDL}
			if policy == "stop" {
				o.TableYAML = "    on_partition_change: stop\n"
			}
			s := itemsTarget(t, o, icebergDestination(t))
			s.p.worker("worker")
			s.p.sluice("start")
			s.p.waitStream(itemsTable)
			s.p.exec(`UPDATE public.items SET qty = -1 WHERE id <= 5`)
			s.waitEqual()
			for _, c := range partitionChanges {
				t.Logf("%s: %s", policy, c.name)
				s.p.exec(c.sql...)
				if policy == "stop" {
					appErr := s.p.waitTableFailed(itemsTable)
					if appErr.Type() != failure.PartitionChanged {
						t.Fatalf("%s: the table failed with %s (%v), want %s", c.name, appErr.Type(), appErr, failure.PartitionChanged)
					}
					for _, want := range []string{"public.items", c.partition, "sluice resync --table public.items"} {
						if !strings.Contains(appErr.Error(), want) {
							t.Errorf("%s: the table's error does not name %q: %v", c.name, want, appErr)
						}
					}
					s.p.sluice("resync", "--table", "public.items")
				}
				s.p.exec(c.live...)
				s.waitEqual()
			}
		})
	}
}
