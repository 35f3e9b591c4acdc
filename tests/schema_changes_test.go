package tests

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/failure"
)

// TestSchemaChangesEverySink runs the schema-change matrix of docs/schema-changes.md on every
// sink, one streaming pipeline of public.items per sink, the cases one after the other:
//
//   - Type widening while streaming (int → bigint, numeric(10,2) → numeric(14,2)): the sink's
//     columns widened in place, and since int → bigint rewrites the table (Postgres rewrites
//     every row, with or without USING) the table resyncs (its backfill position changes); the
//     sink equals the source over every column.
//   - DROP COLUMN while streaming: applied; the sink equals the source key by key over the
//     columns left (the sink keeps the dropped column, NULL for rows written since).
//   - RENAME COLUMN while streaming: the table stops with SchemaChanged naming the rename and the
//     remedy; the remedy (sluice resync) leaves the sink equal to the source under the new name.
//   - An incompatible type change (text → integer): the table stops with SchemaChanged naming
//     the column, both types and the remedy.
func TestSchemaChangesEverySink(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
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

			// Type widening: followed, the sink's columns widened in place (every column compared,
			// values beyond the old types' range included); int → bigint rewrote the table, so it
			// resynced.
			before := backfillPosition(t, s.p, itemsTable)
			s.p.exec(`ALTER TABLE public.items ALTER COLUMN qty TYPE bigint, ALTER COLUMN price TYPE numeric(14,2)`,
				`UPDATE public.items SET qty = 5000000000 + id, price = 123456789012.34 WHERE id <= 10`)
			equalOver("after widening qty to bigint and price to numeric(14,2)", d.items)
			if backfillPosition(t, s.p, itemsTable) == before {
				t.Fatalf("int → bigint rewrote the table, but it did not resync")
			}

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
			// A resume would follow the stream under the new name and diverge: refused.
			if out, err := s.p.sluiceFails("resume", "--table", "public.items"); err == nil || !strings.Contains(err.Error()+out, "sluice resync --table public.items") {
				t.Fatalf("sluice resume after a rename: err %v, output %q; want a refusal naming sluice resync", err, out)
			}
			s.p.started = time.Now().Add(-time.Second)
			s.p.sluice("resync", "--table", "public.items")
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

// checkSchemaStop waits for public.items to stop with failure.SchemaChanged and checks
// that the error names the change and the remedy.
func checkSchemaStop(t *testing.T, s *sinkTarget, change string) {
	t.Helper()
	appErr := s.p.waitTableFailed(itemsTable)
	if appErr.Type() != failure.SchemaChanged {
		t.Fatalf("the table failed with %s (%v), want %s", appErr.Type(), appErr, failure.SchemaChanged)
	}
	for _, want := range []string{change, "sluice resync --table public.items"} {
		if !strings.Contains(appErr.Error(), want) {
			t.Errorf("the stop does not say %q: %v", want, appErr)
		}
	}
}

// TestReplicaIdentityChangeStopsTheTable: a replica identity changed while streaming to an index
// without the key (a DELETE would carry only the index's columns) is seen at the table's next
// RELATION, before any DELETE, and stops the table with ReplicaIdentityChanged naming the identity, the
// key column and the remedy, on every sink; once the identity is set back, `sluice resume`
// brings the sink to equal the source key by key, every column. (REPLICA IDENTITY NOTHING needs
// no stop: Postgres refuses UPDATE and DELETE on the table while the publication publishes them.)
func TestReplicaIdentityChangeStopsTheTable(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			d := sk.dest(t)
			s := itemsTarget(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 500)}}, d)
			s.know([2]int{1, 500}, [2]int{901, 910})
			s.p.worker("worker")
			s.p.sluice("start")
			s.p.waitStream(itemsTable)

			s.p.exec(`CREATE UNIQUE INDEX items_name_uq ON public.items (name)`,
				`ALTER TABLE public.items REPLICA IDENTITY USING INDEX items_name_uq`,
				`UPDATE public.items SET qty = coalesce(qty, 0) + 1 WHERE id <= 5`)
			appErr := s.p.waitTableFailed(itemsTable)
			if appErr.Type() != failure.IdentityChanged {
				t.Fatalf("the table failed with %s (%v), want %s", appErr.Type(), appErr, failure.IdentityChanged)
			}
			for _, want := range []string{"replica identity USING INDEX, which does not carry key column id", "REPLICA IDENTITY DEFAULT", "sluice resume --table public.items"} {
				if !strings.Contains(appErr.Error(), want) {
					t.Errorf("the stop does not say %q: %v", want, appErr)
				}
			}

			s.p.exec(`ALTER TABLE public.items REPLICA IDENTITY DEFAULT`)
			resumed := time.Now().Add(-time.Second)
			s.p.sluice("resume", "--table", "public.items")
			s.p.started = resumed
			s.p.waitStream(itemsTable)
			s.p.exec(`UPDATE public.items SET name = name || '+' WHERE id BETWEEN 6 AND 10`,
				`DELETE FROM public.items WHERE id = 11`,
				itemsSeed(901, 910))
			t.Logf("waiting for the sink to equal the source over %v", d.items)
			s.p.waitEqualTo("public.items", "id", d.items, d.read(s.p, d.target("items"), d.items, s.universe()))
		})
	}
}

// TestSchemaChangesWhileStopped: changes made while no worker runs are seen when the reader
// starts again (it starts from the schema it last followed, recorded in staging, not from the
// catalog) and handled as while streaming, on every sink:
//
//   - ADD COLUMN ... DEFAULT: the table resyncs, and the sink equals the source key by key over
//     every column, the new one included (the default in every earlier row).
//   - RENAME COLUMN: the table stops with SchemaChanged naming the rename and the remedy.
func TestSchemaChangesWhileStopped(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			d := sk.dest(t)
			s := itemsTarget(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 500)}}, d)
			s.know([2]int{1, 500})
			w := s.p.worker("worker")
			s.p.sluice("start")
			s.p.waitStream(itemsTable)
			s.p.exec(`UPDATE public.items SET qty = coalesce(qty, 0) + 1 WHERE id <= 5`)
			s.p.waitEqualTo("public.items", "id", d.items, d.read(s.p, d.target("items"), d.items, s.universe()))

			if err := w.Stop(); err != nil {
				t.Fatal(err)
			}
			s.p.exec(`ALTER TABLE public.items ADD COLUMN note text NOT NULL DEFAULT 'dflt'`,
				`UPDATE public.items SET qty = coalesce(qty, 0) + 1 WHERE id <= 3`)
			w = s.p.worker("worker-2")
			cols := append(slices.Clone(d.items), "note")
			t.Logf("waiting for the sink to equal the source over %v (the added column's default in every row)", cols)
			s.p.waitEqualTo("public.items", "id", cols, d.read(s.p, d.target("items"), cols, s.universe()))

			if err := w.Stop(); err != nil {
				t.Fatal(err)
			}
			s.p.exec(`ALTER TABLE public.items RENAME COLUMN qty TO quantity`,
				`UPDATE public.items SET quantity = quantity + 1 WHERE id <= 5`)
			s.p.worker("worker-3")
			checkSchemaStop(t, s, "column qty was renamed to quantity")
		})
	}
}
