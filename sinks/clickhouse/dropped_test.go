package clickhouse

import (
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// TestColumnDroppedByHand: a column an operator dropped from the target is not added back while
// the table holds rows (they lost its values); the next batch is poison naming the column and
// both remedies; once the table is emptied (DiscardSnapshot, a resync's first step) EnsureTable
// adds it back for the backfill to fill. A column the source adds is still added.
func TestColumnDroppedByHand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	h.apply(ins(1, "a", 1))
	if err := h.conn.Exec(t.Context(), "ALTER TABLE "+quote(h.db)+".orders DROP COLUMN qty"); err != nil {
		t.Fatal(err)
	}
	added := h.spec
	added.Schema.Columns = append(append([]batch.Column(nil), added.Schema.Columns...), batch.Column{Name: "note", TypeOID: 25, TypeName: "text"})
	if err := h.sink.EnsureTable(t.Context(), added); err != nil {
		t.Fatalf("EnsureTable after the operator's drop: %v", err)
	}
	cols := h.columns()
	if _, ok := cols["qty"]; ok {
		t.Fatal("EnsureTable added qty back to a table whose rows lost its values")
	}
	if _, ok := cols["note"]; !ok {
		t.Fatalf("EnsureTable did not add column note, which the source added: %v", cols)
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
	if _, ok := h.columns()["qty"]; !ok {
		t.Fatal("EnsureTable did not add qty back to the emptied table")
	}
}

// columns returns the columns of the harness's target and their types.
func (h *harness) columns() map[string]string {
	h.t.Helper()
	rows, err := h.conn.Query(h.t.Context(), "SELECT name, type FROM system.columns WHERE database = ? AND table = 'orders'", h.db)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, typ string
		if err := rows.Scan(&n, &typ); err != nil {
			h.t.Fatal(err)
		}
		out[n] = typ
	}
	return out
}
