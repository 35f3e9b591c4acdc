package tests

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/reader"
)

// TestSchemaChangesEverySink runs the schema-change matrix of docs/schema-changes.md on every
// sink, one streaming pipeline of public.items per sink, the cases one after the other:
//
//   - DROP COLUMN while streaming: applied; the sink equals the source key by key over the
//     columns left (the sink keeps the dropped column, NULL for rows written since).
//   - RENAME COLUMN while streaming: the table stops with SchemaChanged naming the rename and the
//     remedy; the remedy (sluice resync) leaves the sink equal to the source under the new name.
//   - An incompatible type change (text → integer): the table stops with SchemaChanged naming
//     the column, both types and the remedy.
//
// On Couchbase the resync of a target that committed stream batches stops by name (Sluice cannot
// empty it); the test checks that stop and ends there.
func TestSchemaChangesEverySink(t *testing.T) {
	t.Parallel()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			d := sk.dest(t)
			s := itemsTarget(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 2000)}}, d)
			s.know([2]int{1, 2000}, [2]int{5001, 5010})
			target := d.target("items")
			equalOver := func(why string, cols []string) {
				t.Helper()
				t.Logf("%s: waiting for the sink to equal the source over %v", why, cols)
				s.p.waitEqualTo("public.items", "id", cols, d.read(s.p, target, cols, s.universe()))
			}
			without := func(cols []string, drop string) []string {
				return slices.DeleteFunc(slices.Clone(cols), func(c string) bool { return c == drop })
			}
			s.p.worker("worker")
			s.p.sluice("start")
			s.p.waitStream(itemsTable)

			// DROP COLUMN: followed, never a stop.
			s.p.exec(`ALTER TABLE public.items DROP COLUMN price`,
				`UPDATE public.items SET qty = coalesce(qty, 0) + 1 WHERE id <= 20`,
				`INSERT INTO public.items (id, name, qty) SELECT g, 'after-drop-' || g, g FROM generate_series(5001, 5010) g`,
				`DELETE FROM public.items WHERE id = 7`)
			cols := without(d.items, "price")
			equalOver("after DROP COLUMN price", cols)

			// RENAME COLUMN: stops the table by name, with the remedy.
			s.p.exec(`ALTER TABLE public.items RENAME COLUMN qty TO quantity`,
				`UPDATE public.items SET quantity = quantity + 1 WHERE id <= 5`)
			checkSchemaStop(t, s, "column qty was renamed to quantity")
			s.p.sluice("resync", "--table", "public.items")
			if sk.name == "couchbase" {
				// A Couchbase target that committed stream batches cannot be emptied by Sluice
				// (only snapshot documents are indexed): the resync stops by name and says what
				// the operator drops first (docs/schema-changes.md).
				appErr := s.p.waitTableFailed(itemsTable)
				if !strings.Contains(appErr.Error(), "drop collection") {
					t.Fatalf("the resync of a streamed Couchbase target: %v, want a stop that says to drop the collection", appErr)
				}
				return
			}
			cols = slices.Clone(cols)
			cols[slices.Index(cols, "qty")] = "quantity"
			equalOver("after the rename and sluice resync", cols)

			// An incompatible type change: stops the table by name, with both types.
			s.p.exec(`ALTER TABLE public.items ALTER COLUMN name TYPE integer USING length(name)`,
				`UPDATE public.items SET quantity = 1 WHERE id = 1`)
			checkSchemaStop(t, s, "column name changed type from text to integer")
		})
	}
}

// checkSchemaStop waits for public.items to stop with reader.ErrTypeSchemaChanged and checks
// that the error names the change and the remedy.
func checkSchemaStop(t *testing.T, s *sinkTarget, change string) {
	t.Helper()
	appErr := s.p.waitTableFailed(itemsTable)
	if appErr.Type() != reader.ErrTypeSchemaChanged {
		t.Fatalf("the table failed with %s (%v), want %s", appErr.Type(), appErr, reader.ErrTypeSchemaChanged)
	}
	for _, want := range []string{change, "sluice resync --table public.items"} {
		if !strings.Contains(appErr.Error(), want) {
			t.Errorf("the stop does not say %q: %v", want, appErr)
		}
	}
}
