package jsonlsink_test

import (
	"encoding/json"
	"testing"

	"github.com/sluicecdc/sluice/examples/plugins/jsonl/jsonlsink"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/plugin/positionstore"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestConformance runs the sink conformance suite on the JSON Lines sink in process, with its
// positions in the position store, as the worker uses a plugin without a position of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	root, dsn := t.TempDir(), testenv.NewDatabase(t)
	sinktest.Run(t, sinktest.Harness{
		Open: func(t *testing.T) sinks.Sink {
			s, err := jsonlsink.New(root)
			if err != nil {
				t.Fatal(err)
			}
			return positionstore.Wrap(s, false, openStore(t, dsn))
		},
		Target: func(t *testing.T) string { return testenv.RandomName("t_") },
		Read: func(t *testing.T, _ sinks.Sink, spec sinks.TableSpec, _ []int64) map[int64]sinktest.Row {
			return readRows(t, root, spec)
		},
		// A stale attempt and its retry take turns on the store's row lock, so none can be
		// overtaken between its guard and its write; positionstore's tests cover the turns.
	})
}

func openStore(t *testing.T, dsn string) *positionstore.Store {
	t.Helper()
	st, err := positionstore.Open(t.Context(), positionstore.Options{DSN: dsn, Pipeline: "conformance"})
	if err != nil {
		t.Fatalf("opening the position store: %v", err)
	}
	return st
}

// readRows reads the conformance table's visible rows from the files, as a user would.
func readRows(t *testing.T, root string, spec sinks.TableSpec) map[int64]sinktest.Row {
	t.Helper()
	rows, err := jsonlsink.ReadTable(root, spec.Target)
	if err != nil {
		t.Fatalf("reading target %s: %v", spec.Target, err)
	}
	out := map[int64]sinktest.Row{}
	for k, l := range rows {
		var key []int64
		if err := json.Unmarshal([]byte(k), &key); err != nil || len(key) != 1 {
			t.Fatalf("target %s: key %s is not one bigint: %v", spec.Target, k, err)
		}
		var r struct {
			ID   int64   `json:"id"`
			Name *string `json:"name"`
			Qty  *int32  `json:"qty"`
		}
		raw, _ := json.Marshal(l.Row)
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("target %s: row %s: %v", spec.Target, raw, err)
		}
		if r.ID != key[0] {
			t.Errorf("target %s: row keyed %d holds id %d", spec.Target, key[0], r.ID)
		}
		if _, ok := l.Row["committed_at"]; !ok {
			t.Errorf("target %s: row %d lacks the metadata column committed_at", spec.Target, r.ID)
		}
		var row sinktest.Row
		if r.Name != nil {
			row.Name = *r.Name
		}
		if r.Qty != nil {
			row.Qty = *r.Qty
		}
		out[key[0]] = row
	}
	return out
}
