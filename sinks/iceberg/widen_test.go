package iceberg

import (
	"fmt"
	stdmaps "maps"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
)

// TestEnsureTableWidens: a column widened in the source (int → bigint, numeric(12,2) →
// numeric(16,2)) is promoted in place by EnsureTable; rows written before and after read back
// exactly, values beyond the old type's range included. A narrowing stays poison
// (TestEnsureTableEvolution).
func TestEnsureTableWidens(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(orders.Insert(1, "a", 7))
	wide := orders.Spec(h.spec.Target)
	wide.Schema.Columns[2] = batch.Column{Name: "qty", TypeOID: 20, TypeName: "bigint"}
	wide.Schema.Columns[3] = batch.Column{Name: "price", TypeOID: 1700, TypeName: "numeric(16,2)", TypeMod: (16<<16 | 2) + 4}
	for range 2 { // idempotent
		if err := h.sink.EnsureTable(t.Context(), wide); err != nil {
			t.Fatalf("EnsureTable with widened columns: %v", err)
		}
	}
	sc := h.table().Schema()
	for name, want := range map[string]string{"qty": "long", "price": "decimal(16, 2)"} {
		if f, ok := sc.FindFieldByName(name); !ok || f.Type.String() != want {
			t.Errorf("column %s is %v after the widening, want %s", name, f.Type, want)
		}
	}
	h.spec = wide
	h.apply(batch.Change{Op: batch.OpInsert, Values: []batch.Value{sinktest.Text("2"), sinktest.Text("b"), sinktest.Text("5000000000"), sinktest.Text("12345678901234.56")}})
	want := map[string]string{"1": "7 7.5", "2": "5000000000 12345678901234.56"}
	_, itr, err := h.table().Scan(table.WithSelectedFields("id", "qty", "price")).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rec, err := range itr {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			got[rec.Column(0).ValueStr(i)] = fmt.Sprintf("%s %s", rec.Column(1).ValueStr(i), rec.Column(2).ValueStr(i))
		}
		rec.Release()
	}
	if !stdmaps.Equal(got, want) {
		t.Errorf("rows after the widening: %v, want %v", got, want)
	}
}
