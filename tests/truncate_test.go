package tests

import "testing"

// TestTruncateResyncsTheTable truncates a streaming table and writes new rows: the reader asks
// the table to resync (a snapshot taken after the truncate), and the Iceberg table ends equal to
// the source: no row from before the truncate survives, none after it is lost.
func TestTruncateResyncsTheTable(t *testing.T) {
	defer parallel(t)()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 3000))
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	p.exec(`UPDATE public.items SET qty = -1 WHERE id <= 10`)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
	p.exec(`TRUNCATE public.items`, itemsSeed(5001, 5200), `DELETE FROM public.items WHERE id = 5001`)
	got := p.waitEqual("public.items", "raw.items", "id", itemColumns)
	if len(got.Rows) != 199 {
		t.Fatalf("after the truncate the sink holds %d rows, want 199", len(got.Rows))
	}
}
