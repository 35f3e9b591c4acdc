package tests

import "testing"

// TestAddColumnEvolvesTheTarget adds a column to a streaming source table: the batches read with
// the new column evolve the Iceberg table (CommitBatch's EnsureTable), and the table ends equal to
// the source over the old and the new column, rows written before the column included (NULL).
func TestAddColumnEvolvesTheTarget(t *testing.T) {
	t.Parallel()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 2000))
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	p.exec(`UPDATE public.items SET qty = 7 WHERE id <= 10`)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
	p.exec(`ALTER TABLE public.items ADD COLUMN note text`,
		`UPDATE public.items SET note = 'note-' || id WHERE id <= 100`,
		`INSERT INTO public.items (id, name, qty, note) VALUES (3001, 'after', 1, 'new row')`,
		`DELETE FROM public.items WHERE id = 5`)
	p.waitEqual("public.items", "raw.items", "id", append(append([]string{}, itemColumns...), "note"))
}
