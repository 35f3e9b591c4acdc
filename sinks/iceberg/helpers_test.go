package iceberg

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
)

// row is the visible state of one key in a test table.
type row struct {
	Name string
	Qty  int64
}

// harness is a sink on a fresh sqlite catalog and local warehouse, or on cfg when given.
type harness struct {
	t    testing.TB
	sink *Sink
	spec sinks.TableSpec
	lsn  uint64
}

func newHarness(t testing.TB, cfg *Config) *harness {
	t.Helper()
	if cfg == nil {
		dir := t.TempDir()
		cfg = &Config{
			Catalog:   CatalogConfig{Type: CatalogSQL, Dialect: DialectSQLite, URI: filepath.Join(dir, "catalog.db")},
			Warehouse: "file://" + filepath.Join(dir, "warehouse"),
		}
	}
	s, err := New(t.Context(), *cfg, Options{Logger: sinktest.Logger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	h := &harness{t: t, sink: s, spec: orders.Spec("raw.orders"), lsn: 0x16B3748}
	if err := s.EnsureTable(t.Context(), h.spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	return h
}

// batch builds the next batch of changes (one transaction, increasing positions).
func (h *harness) batch(phase batch.Phase, changes ...batch.Change) sinks.Batch {
	h.t.Helper()
	h.lsn += 0x100
	return orders.Batch(h.t, h.spec, phase, h.lsn, changes...)
}

// apply builds and applies a stream batch, failing the test on error.
func (h *harness) apply(changes ...batch.Change) sinks.Batch {
	h.t.Helper()
	b := h.batch(batch.PhaseStream, changes...)
	if err := h.sink.Apply(h.t.Context(), b); err != nil {
		h.t.Fatalf("Apply at %s: %v", b.Hi, err)
	}
	return b
}

func (h *harness) table() *table.Table {
	h.t.Helper()
	ident, _ := identifier(h.spec.Target)
	tbl, err := h.sink.Catalog().LoadTable(h.t.Context(), ident)
	if err != nil {
		h.t.Fatalf("LoadTable: %v", err)
	}
	return tbl
}

// rows scans the table with deletes applied, failing on duplicate keys.
func (h *harness) rows() map[int64]row {
	h.t.Helper()
	got, err := scanRows(h.t.Context(), h.table())
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

func scanRows(ctx context.Context, tbl *table.Table) (map[int64]row, error) {
	_, itr, err := tbl.Scan(table.WithSelectedFields("id", "name", "qty")).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	got := map[int64]row{}
	for rec, err := range itr {
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		ids := rec.Column(0).(*array.Int64)
		names := rec.Column(1).(*array.String)
		qtys := rec.Column(2).(*array.Int32)
		for i := range ids.Len() {
			id := ids.Value(i)
			if _, dup := got[id]; dup {
				rec.Release()
				return nil, fmt.Errorf("key %d is visible twice", id)
			}
			got[id] = row{Name: names.Value(i), Qty: int64(qtys.Value(i))}
		}
		rec.Release()
	}
	return got, nil
}

// position reads the committed position through the Sink interface.
func (h *harness) position() (batch.SourcePosition, bool) {
	h.t.Helper()
	return sinktest.Position(h.t, h.sink, h.spec)
}

// fileCounts counts the live data files and equality delete files from the manifests.
func (h *harness) fileCounts() (data, eqDeletes int) {
	h.t.Helper()
	d, dels, err := liveFiles(h.t.Context(), h.table())
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range dels {
		if f.ContentType() == iceberg.EntryContentEqDeletes {
			eqDeletes++
		}
	}
	return len(d), eqDeletes
}
