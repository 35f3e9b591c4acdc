package clickhouse

import (
	"fmt"
	"maps"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
)

// TestEnsureTableWidens: a column widened in the source (int → bigint, numeric(12,2) →
// numeric(16,2)) is widened in place by EnsureTable (MODIFY COLUMN); rows written before and
// after read back exactly, through FINAL and the view, values beyond the old type's range
// included. A key column retyped is still poison.
func TestEnsureTableWidens(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	h.apply(orders.Insert(1, "a", 7))
	wide := h.spec
	wide.Schema.Columns = append([]batch.Column(nil), wide.Schema.Columns...)
	wide.Schema.Columns[2] = batch.Column{Name: "qty", TypeOID: 20, TypeName: "bigint"}
	wide.Schema.Columns[3] = batch.Column{Name: "price", TypeOID: 1700, TypeName: "numeric(16,2)", TypeMod: (16<<16 | 2) + 4}
	for range 2 { // idempotent
		if err := h.sink.EnsureTable(t.Context(), wide); err != nil {
			t.Fatalf("EnsureTable with widened columns: %v", err)
		}
	}
	cols := h.columns()
	for name, want := range map[string]string{"qty": "Nullable(Int64)", "price": "Nullable(Decimal(16, 2))"} {
		if cols[name] != want {
			t.Errorf("column %s is %s after the widening, want %s", name, cols[name], want)
		}
	}
	h.spec = wide
	b := h.batch(batch.PhaseStream, batch.Change{Op: batch.OpInsert, Values: []batch.Value{sinktest.Text("2"), sinktest.Text("b"), sinktest.Text("5000000000"), sinktest.Text("12345678901234.56")}})
	if err := h.sink.Apply(t.Context(), b); err != nil {
		t.Fatalf("Apply after the widening: %v", err)
	}
	want := map[int64]string{1: "7 7.50", 2: "5000000000 12345678901234.56"}
	for _, from := range []string{fmt.Sprintf("%s.orders FINAL WHERE _is_deleted = 0", quote(h.db)), quote(h.db) + "." + quote("orders"+ViewSuffix)} {
		rows, err := h.conn.Query(t.Context(), "SELECT id, toString(qty), toString(price) FROM "+from)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]string{}
		for rows.Next() {
			var id int64
			var qty, price string
			if err := rows.Scan(&id, &qty, &price); err != nil {
				t.Fatal(err)
			}
			got[id] = qty + " " + price
		}
		rows.Close()
		if !maps.Equal(got, want) {
			t.Errorf("rows of %s after the widening: %v, want %v", from, got, want)
		}
	}

	rekeyed := wide
	rekeyed.Schema.Columns = append([]batch.Column(nil), wide.Schema.Columns...)
	rekeyed.Schema.Columns[0].TypeOID, rekeyed.Schema.Columns[0].TypeName = 1700, "numeric(30,0)"
	rekeyed.Schema.Columns[0].TypeMod = (30<<16 | 0) + 4
	if err := h.sink.EnsureTable(t.Context(), rekeyed); !sinks.IsPoison(err) {
		t.Errorf("EnsureTable with a retyped key column: %v, want poison", err)
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
