package iceberg

import (
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// TestColumnDroppedByHand: a column an operator dropped from the target is not added back while
// the table holds rows (they lost its values); the next batch is poison naming the column and
// both remedies; once the table is emptied (DiscardSnapshot, a resync's first step) EnsureTable
// adds it back for the backfill to fill.
func TestColumnDroppedByHand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(ins(1, "a", 1))
	tx := h.table().NewTransaction()
	if err := tx.UpdateSchema(true, false).DeleteColumn([]string{"qty"}).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h.sink.EnsureTable(t.Context(), h.spec); err != nil {
		t.Fatalf("EnsureTable after the operator's drop: %v", err)
	}
	if _, ok := h.table().Schema().FindFieldByName("qty"); ok {
		t.Fatal("EnsureTable added qty back to a table whose rows lost its values")
	}
	err := h.sink.Apply(t.Context(), h.batch(batch.PhaseStream, upd(1, "a2", 2)))
	if !sinks.IsPoison(err) {
		t.Fatalf("Apply of a batch carrying the dropped column: %v, want poison", err)
	}
	for _, want := range []string{"shop.orders", "no column qty", "sluice resync --table shop.orders", "add the column back"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the poison error does not say %q: %v", want, err)
		}
	}
	if err := h.sink.DiscardSnapshot(t.Context(), h.spec); err != nil {
		t.Fatal(err)
	}
	if err := h.sink.EnsureTable(t.Context(), h.spec); err != nil {
		t.Fatalf("EnsureTable of the emptied table: %v", err)
	}
	if _, ok := h.table().Schema().FindFieldByName("qty"); !ok {
		t.Fatal("EnsureTable did not add qty back to the emptied table")
	}
	h.apply(ins(1, "a3", 3))
	if d := diffRows(map[int64]row{1: {"a3", 3}}, h.rows()); d != "" {
		t.Errorf("after the resync:\n%s", d)
	}
}
