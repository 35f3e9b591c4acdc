package iceberg

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

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
			tbl, ok := loadTable(t, s, spec)
			if !ok {
				return map[int64]sinktest.Row{}
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
		DropColumn: func(t *testing.T, s sinks.Sink, spec sinks.TableSpec, column string) {
			tbl, ok := loadTable(t, s, spec)
			if !ok {
				t.Fatalf("table %s does not exist", spec.Target)
			}
			tx := tbl.NewTransaction()
			if err := tx.UpdateSchema(true, false).DeleteColumn([]string{column}).Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
		HasColumn: func(t *testing.T, s sinks.Sink, spec sinks.TableSpec, column string) bool {
			tbl, ok := loadTable(t, s, spec)
			if !ok {
				t.Fatalf("table %s does not exist", spec.Target)
			}
			_, has := tbl.Schema().FindFieldByName(column)
			return has
		},
	})
}

// loadTable loads spec's target from s's catalog; ok is false when it does not exist.
func loadTable(t *testing.T, s sinks.Sink, spec sinks.TableSpec) (tbl *table.Table, ok bool) {
	t.Helper()
	ident, _ := identifier(spec.Target)
	tbl, err := s.(*Sink).Catalog().LoadTable(context.Background(), ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("LoadTable %s: %v", spec.Target, err)
	}
	return tbl, true
}
