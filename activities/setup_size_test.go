package activities

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// TestSetupResultOf500TablesFitsAPayload: SetupSource returns the tables without their columns,
// so a pipeline of 500 tables stays far under the payload budget (256 KiB), where 370 tables of
// 40 columns with their schemas passed Temporal's 2 MB limit.
func TestSetupResultOf500TablesFitsAPayload(t *testing.T) {
	t.Parallel()
	id := batch.SourceID{SystemID: "7312345678901234567", Timeline: 1, Slot: "sluice_many_tables_pipeline"}
	var res SetupResult
	res.Source = id
	for i := range 500 {
		name := batch.TableName{Schema: "warehouse_inventory", Name: fmt.Sprintf("stock_movements_by_region_%03d", i)}
		res.Tables = append(res.Tables, TableConfig{
			Pipeline: "many-tables-pipeline",
			Spec:     sinks.TableSpec{Target: "raw." + name.Name, Schema: batch.Schema{Table: name}},
			Sink:     SinkRef{Name: "iceberg"},
			Source:   &id,
		})
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SetupResult of 500 tables: %d bytes (%d per table)", len(b), len(b)/500)
	if len(b) > 256<<10 {
		t.Fatalf("SetupResult of 500 tables is %d bytes, over the 256 KiB payload budget", len(b))
	}
}
