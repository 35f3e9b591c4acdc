package iceberg

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
)

var testSource = batch.SourceID{SystemID: "7300000000000000001", Timeline: 1, Slot: "sluice_test"}

// ordersSpec is shop.orders(id int8 key, name text, qty int4, price numeric(12,2)) with
// __commit_ts materialized as committed_at.
func ordersSpec(target string) sinks.TableSpec {
	return sinks.TableSpec{
		Target:   target,
		Schema:   sinktest.OrdersSchema(),
		Metadata: []sinks.MetadataColumn{{From: "commit_ts", As: "committed_at"}},
	}
}

// row is the visible state of one key in a test table.
type row struct {
	Name string
	Qty  int64
}

// ins, upd, snap and del build changes of ordersSpec's table.
func ins(id int64, name string, qty int) batch.Change {
	return sinktest.OrderChange(batch.OpInsert, id, name, qty)
}
func upd(id int64, name string, qty int) batch.Change {
	return sinktest.OrderChange(batch.OpUpdate, id, name, qty)
}
func snap(id int64, name string, qty int) batch.Change {
	return sinktest.OrderChange(batch.OpSnapshot, id, name, qty)
}
func del(id int64) batch.Change { return sinktest.OrderDelete(id) }

func txt(s string) batch.Value { return batch.Value{Text: []byte(s)} }

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
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := New(t.Context(), *cfg, Options{Logger: log})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	h := &harness{t: t, sink: s, spec: ordersSpec("raw.orders"), lsn: 0x16B3748}
	if err := s.EnsureTable(t.Context(), h.spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	return h
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// batch builds the next batch of changes (one transaction, increasing positions).
func (h *harness) batch(phase batch.Phase, changes ...batch.Change) sinks.Batch {
	h.t.Helper()
	h.lsn += 0x100
	for i := range changes {
		changes[i].Pos = batch.Position{LSN: h.lsn, Seq: uint32(i)}
		if changes[i].Op != batch.OpSnapshot {
			changes[i].CommitTS = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		}
	}
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, h.spec.Schema)
	if err != nil {
		h.t.Fatalf("NewRecordBuilder: %v", err)
	}
	defer rb.Release()
	rec, err := rb.Build(changes, time.Now())
	if err != nil {
		h.t.Fatalf("Build: %v", err)
	}
	h.t.Cleanup(rec.Release)
	last := batch.Position{LSN: h.lsn, Seq: uint32(max(len(changes)-1, 0))}
	return sinks.Batch{
		Spec: h.spec, Phase: phase, Record: rec,
		Lo: batch.SourcePosition{Source: testSource, Position: batch.Position{LSN: h.lsn}},
		Hi: batch.SourcePosition{Source: testSource, Position: last},
	}
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
	p, ok, err := h.sink.Position(h.t.Context(), h.spec)
	if err != nil {
		h.t.Fatalf("Position: %v", err)
	}
	return p, ok
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

// diffRows compares two images of a table by key: keys missing, different or not expected.
func diffRows[V comparable](want, got map[int64]V) string {
	var out string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			out += fmt.Sprintf("key %d missing (want %+v)\n", k, w)
		} else if g != w {
			out += fmt.Sprintf("key %d = %+v, want %+v\n", k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out += fmt.Sprintf("key %d = %+v should not be visible\n", k, g)
		}
	}
	return out
}
