package clickhouse

import (
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
)

// TestRetypedColumnIsPoisonThatSaysSo: an operator changes a target column's type in ClickHouse
// under the pipeline; the next batch is poison, and the error names the column, both types and
// the statement that changes it back. Changed back, the same batch commits.
func TestRetypedColumnIsPoisonThatSaysSo(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	h.apply(orders.Insert(1, "a", 1))
	var want string
	if err := h.conn.QueryRow(t.Context(), "SELECT type FROM system.columns WHERE database = ? AND table = 'orders' AND name = 'qty'", h.db).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if err := h.conn.Exec(t.Context(), "ALTER TABLE "+quote(h.db)+".orders MODIFY COLUMN qty Nullable(String)"); err != nil {
		t.Fatal(err)
	}
	b := h.batch(batch.PhaseStream, orders.Insert(2, "b", 2), orders.Update(1, "a2", 3))
	err := h.sink.Apply(t.Context(), b)
	if !sinks.IsPoison(err) {
		t.Fatalf("Apply into a retyped column: got %v, want poison", err)
	}
	for _, s := range []string{"shop.orders", "column qty", "is Nullable(String) in ClickHouse", "writes " + want, "MODIFY COLUMN `qty` " + want} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not say %q: %v", s, err)
		}
	}
	if err := h.conn.Exec(t.Context(), "ALTER TABLE "+quote(h.db)+".orders MODIFY COLUMN qty "+want); err != nil {
		t.Fatal(err)
	}
	if err := h.sink.Apply(t.Context(), b); err != nil {
		t.Fatalf("Apply after the column was changed back: %v", err)
	}
	h.check("after the fix")
}
