package tests

import "testing"

// TestAddColumnEvolvesTheTarget adds a column to a streaming source table: the batches read with
// the new column evolve the Iceberg table (CommitBatch's EnsureTable), and the table ends equal to
// the source over the old and the new column, rows written before the column included (NULL).
func TestAddColumnEvolvesTheTarget(t *testing.T) {
	defer parallel(t)()
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

// TestAddColumnWithDefaultResyncs adds columns with a default to a streaming table. Postgres
// gives every existing row the default without writing those rows to the WAL, so the stream
// never carries their value: the reader notices the default and resyncs the table from a new
// snapshot, and the sink ends equal to the source over the new columns for old rows too.
func TestAddColumnWithDefaultResyncs(t *testing.T) {
	defer parallel(t)()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 2000))
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	p.exec(`ALTER TABLE public.items ADD COLUMN flag int NOT NULL DEFAULT 7`,
		`ALTER TABLE public.items ADD COLUMN tag text DEFAULT 'fresh'`,
		`UPDATE public.items SET flag = 8 WHERE id <= 10`,
		`INSERT INTO public.items (id, name, qty) VALUES (3001, 'after', 1)`,
		`DELETE FROM public.items WHERE id = 5`)
	p.waitEqual("public.items", "raw.items", "id", append(append([]string{}, itemColumns...), "flag", "tag"))
}
