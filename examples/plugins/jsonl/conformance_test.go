package main

import (
	"encoding/json"
	"testing"

	"github.com/sluicecdc/sluice/examples/plugins/jsonl/jsonlsink"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/plugin"
	"github.com/sluicecdc/sluice/sinks/plugin/plugintest"
	"github.com/sluicecdc/sluice/sinks/plugin/positionstore"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestConformance runs the sink conformance suite against this plugin through the real path:
// the plugin built and started as its own process, the worker's client (sinks/plugin) connected
// to it over gRPC and wrapped with the position store on a fresh database, as the worker does.
// The rows are read back from the files, as a user would.
func TestConformance(t *testing.T) {
	root, dsn := t.TempDir(), testenv.NewDatabase(t)
	bin := plugintest.Build(t, "./examples/plugins/jsonl")
	proc := plugintest.Start(t, bin, nil, "-listen", "127.0.0.1:0", "-dir", root)
	sinktest.Run(t, sinktest.Harness{
		Open: func(t *testing.T) sinks.Sink {
			c, err := plugin.Open(t.Context(), plugin.Config{Address: proc.Addr})
			if err != nil {
				t.Fatalf("plugin.Open: %v", err)
			}
			if c.OwnPosition() {
				t.Fatalf("handshake %s: want no position of its own", c.Handshake())
			}
			st, err := positionstore.Open(t.Context(), positionstore.Options{DSN: dsn, Pipeline: "conformance"})
			if err != nil {
				t.Fatalf("opening the position store: %v", err)
			}
			return positionstore.Wrap(c, c.OwnPosition(), st)
		},
		Target: func(t *testing.T) string { return testenv.RandomName("t_") },
		Read: func(t *testing.T, _ sinks.Sink, spec sinks.TableSpec, _ []int64) map[int64]sinktest.Row {
			rows, err := jsonlsink.ReadTable(root, spec.Target)
			if err != nil {
				t.Fatalf("reading target %s: %v", spec.Target, err)
			}
			out := map[int64]sinktest.Row{}
			for _, l := range rows {
				var r struct {
					ID   int64
					Name string
					Qty  int32
				}
				raw, _ := json.Marshal(l.Row)
				if err := json.Unmarshal(raw, &r); err != nil {
					t.Fatalf("target %s: row %s: %v", spec.Target, raw, err)
				}
				if _, dup := out[r.ID]; dup {
					t.Fatalf("target %s: id %d visible twice", spec.Target, r.ID)
				}
				out[r.ID] = sinktest.Row{Name: r.Name, Qty: r.Qty}
			}
			return out
		},
	})
}
