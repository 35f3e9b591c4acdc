package tests

import (
	"testing"

	"github.com/sluicecdc/sluice/failure"
)

// TestCouchbaseResyncAfterStreaming resyncs a Couchbase target that has streamed: public.items
// (partitioned, on_partition_change: stop) streams inserts into one partition, updates, deletes
// of snapshot and of streamed keys and a key change; then that partition is detached, which the
// WAL cannot show, the table stops, and `sluice resync --table` empties the collection and copies
// the table again. Among the documents that must go are keys the stream created (inserted, moved
// to by the key change), which only a key index kept in the stream phase can find. Afterwards the
// collection equals the source key by key, every column, and no key deleted before the resync,
// by the stream or by the detach, is back.
func TestCouchbaseResyncAfterStreaming(t *testing.T) {
	defer parallel(t)()
	s := itemsTarget(t, pipelineOptions{SetupSQL: partitionChangeDDL, TableYAML: "    on_partition_change: stop\n"},
		couchbaseDestination(t))
	s.know([2]int{1, 1500}, [2]int{200001, 200200}, [2]int{200500, 200500})
	s.p.worker("worker")
	s.p.sluice("start")
	s.p.waitStream(itemsTable)
	s.p.exec(
		itemsSeed(200001, 200200), // into items_high, created by the stream
		`UPDATE public.items SET qty = qty + 1000, tags = tags || '{live}' WHERE id % 50 = 0`,
		`DELETE FROM public.items WHERE id BETWEEN 100 AND 199`,
		`DELETE FROM public.items WHERE id BETWEEN 200001 AND 200050`,
		`UPDATE public.items SET id = 200500 WHERE id = 7`, // from items_low to a new key in items_high
		`INSERT INTO public.items (id, name, qty) VALUES (11, 'x', NULL) ON CONFLICT (id) DO UPDATE SET tags = NULL`,
	)
	s.waitEqual()

	s.p.exec(`ALTER TABLE public.items DETACH PARTITION public.items_high`)
	if appErr := s.p.waitTableFailed(itemsTable); appErr.Type() != failure.PartitionChanged {
		t.Fatalf("the table failed with %s (%v), want %s", appErr.Type(), appErr, failure.PartitionChanged)
	}
	t.Logf("sluice resync: %s", s.p.sluice("resync", "--table", "public.items"))
	s.p.exec(`UPDATE public.items SET qty = -3 WHERE id BETWEEN 300 AND 310`, `DELETE FROM public.items WHERE id BETWEEN 400 AND 410`)
	s.waitEqual()
}
