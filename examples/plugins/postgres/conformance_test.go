package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/plugin"
	"github.com/sluicecdc/sluice/sinks/plugin/plugintest"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestConformance runs the sink conformance suite against this plugin through the real path: the
// plugin built and started as its own process on a fresh database of the test server, the
// worker's client (sinks/plugin) connected to it over gRPC. The rows are read back from the
// target database directly, as a user would.
func TestConformance(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	bin := plugintest.Build(t, "./examples/plugins/postgres")
	proc := plugintest.Start(t, bin, []string{"SLUICE_PLUGIN_POSTGRES_DSN=" + dsn}, "-listen", "127.0.0.1:0")
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	sinktest.Run(t, sinktest.Harness{
		Open: func(t *testing.T) sinks.Sink {
			c, err := plugin.Open(t.Context(), plugin.Config{Address: proc.Addr})
			if err != nil {
				t.Fatalf("plugin.Open: %v", err)
			}
			if !c.OwnPosition() {
				t.Fatalf("handshake %s: want own position", c.Handshake())
			}
			return c
		},
		Target: func(t *testing.T) string { return testenv.RandomName("t_") },
		Read: func(t *testing.T, _ sinks.Sink, spec sinks.TableSpec, _ []int64) map[int64]sinktest.Row {
			ctx := context.Background()
			out := map[int64]sinktest.Row{}
			var exists bool
			if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", spec.Target).Scan(&exists); err != nil {
				t.Fatal(err)
			}
			if !exists {
				return out
			}
			rows, err := conn.Query(ctx, "SELECT id, coalesce(name, ''), coalesce(qty, 0) FROM "+pgx.Identifier{spec.Target}.Sanitize())
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var (
					id int64
					r  sinktest.Row
				)
				if err := rows.Scan(&id, &r.Name, &r.Qty); err != nil {
					t.Fatal(err)
				}
				if _, dup := out[id]; dup {
					t.Fatalf("id %d visible twice", id)
				}
				out[id] = r
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		},
	})
}
