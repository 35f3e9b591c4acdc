package tests

import (
	"context"
	"slices"
	"testing"
	"time"
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
	t.Parallel()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
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
	t.Parallel()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
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
	t.Parallel()
	s := itemsTarget(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 5000)},
		TableYAML: "    columns: [id, name, qty]\n"}, icebergDestination(t))
	s.p.worker("worker")
	s.p.sluice("start")
	s.p.waitStream(itemsTable)
	s.p.exec(liveItemChanges...)
	read := icebergColumnsReader(s.p, "raw.items", e2eColumns)
	s.p.waitEqualTo("public.items", "id", e2eColumns, read)
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
