package iceberg

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/catalog"

	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestConformance runs the suite every sink passes, on a sqlite catalog and a local warehouse.
func TestConformance(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		Catalog:   CatalogConfig{Type: CatalogSQL, Dialect: DialectSQLite, URI: filepath.Join(dir, "catalog.db")},
		Warehouse: "file://" + filepath.Join(dir, "warehouse"),
	}
	sinktest.Run(t, sinktest.Harness{
		Open: func(t *testing.T) sinks.Sink {
			s, err := New(t.Context(), cfg, Options{})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return s
		},
		Target: func(t *testing.T) string { return "conf." + testenv.RandomName("t_") },
		Read: func(t *testing.T, s sinks.Sink, spec sinks.TableSpec, _ []int64) map[int64]sinktest.Row {
			ident, _ := identifier(spec.Target)
			tbl, err := s.(*Sink).Catalog().LoadTable(context.Background(), ident)
			if errors.Is(err, catalog.ErrNoSuchTable) {
				return map[int64]sinktest.Row{}
			}
			if err != nil {
				t.Fatalf("LoadTable %s: %v", spec.Target, err)
			}
			rows, err := scanRows(context.Background(), tbl)
			if err != nil {
				t.Fatal(err)
			}
			out := map[int64]sinktest.Row{}
			for id, r := range rows {
				out[id] = sinktest.Row{Name: r.Name, Qty: int32(r.Qty)}
			}
			return out
		},
		Overtake: func(t *testing.T, s sinks.Sink, overtaken func(context.Context)) {
			var once sync.Once
			s.(*Sink).beforeCommit = func(ctx context.Context) { once.Do(func() { overtaken(ctx) }) }
		},
	})
}
