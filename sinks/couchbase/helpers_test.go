package couchbase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
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

// row is the visible state of one key: the document's name and qty.
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

// testConfig is the sink configuration for gocaves.
func testConfig(t testing.TB) Config {
	info := testenv.Couchbase(t)
	return Config{ConnStr: info.ConnString, Username: info.Username, Password: info.Password, Bucket: info.Bucket}
}

// harness is a sink on gocaves writing ordersSpec into a collection of a scope of its own.
type harness struct {
	t    testing.TB
	sink *Sink
	spec sinks.TableSpec
	tgt  target
	lsn  uint64
}

func newHarness(t testing.TB, edit func(*Config)) *harness {
	t.Helper()
	cfg := testConfig(t)
	if edit != nil {
		edit(&cfg)
	}
	h := &harness{t: t, sink: openSink(t, cfg), lsn: 0x16B3748}
	h.spec = ordersSpec(testenv.RandomName("t") + ".orders")
	if err := h.sink.EnsureTable(t.Context(), h.spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	var err error
	if h.tgt, err = h.sink.parseTarget(h.spec); err != nil {
		t.Fatal(err)
	}
	return h
}

func openSink(t testing.TB, cfg Config) *Sink {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := New(t.Context(), cfg, Options{Logger: log})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// buildBatch builds a batch of spec at commit LSN lsn (positions lsn:0, lsn:1, ...).
func buildBatch(t testing.TB, spec sinks.TableSpec, phase batch.Phase, lsn uint64, changes ...batch.Change) sinks.Batch {
	t.Helper()
	for i := range changes {
		changes[i].Pos = batch.Position{LSN: lsn, Seq: uint32(i)}
		if changes[i].Op != batch.OpSnapshot {
			changes[i].CommitTS = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		}
	}
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, spec.Schema)
	if err != nil {
		t.Fatalf("NewRecordBuilder: %v", err)
	}
	defer rb.Release()
	rec, err := rb.Build(changes, time.Now())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Cleanup(rec.Release)
	last := batch.Position{LSN: lsn, Seq: uint32(max(len(changes)-1, 0))}
	return sinks.Batch{
		Spec: spec, Phase: phase, Record: rec,
		Lo: batch.SourcePosition{Source: testSource, Position: batch.Position{LSN: lsn}},
		Hi: batch.SourcePosition{Source: testSource, Position: last},
	}
}

// batch builds the next batch of changes (one transaction, increasing positions).
func (h *harness) batch(phase batch.Phase, changes ...batch.Change) sinks.Batch {
	h.t.Helper()
	h.lsn += 0x100
	return buildBatch(h.t, h.spec, phase, h.lsn, changes...)
}

// apply builds and applies a batch, failing the test on error.
func (h *harness) apply(phase batch.Phase, changes ...batch.Change) sinks.Batch {
	h.t.Helper()
	b := h.batch(phase, changes...)
	if err := h.sink.Apply(h.t.Context(), b); err != nil {
		h.t.Fatalf("Apply at %s: %v", b.Hi, err)
	}
	return b
}

// doc reads the document of key id; ok is false when there is none.
func (h *harness) doc(id int64) (map[string]any, bool) {
	h.t.Helper()
	res, err := h.sink.collection(h.tgt).Get(strconv.FormatInt(id, 10), &gocb.GetOptions{Context: h.t.Context()})
	if errors.Is(err, gocb.ErrDocumentNotFound) {
		return nil, false
	}
	if err != nil {
		h.t.Fatalf("Get %d: %v", id, err)
	}
	var m map[string]any
	if err := res.Content(&m); err != nil {
		h.t.Fatalf("decoding %d: %v", id, err)
	}
	return m, true
}

// diff compares the documents of every key in universe with want, key by key: present with the
// name and qty wanted, or absent.
func (h *harness) diff(want map[int64]row, universe map[int64]bool) string {
	h.t.Helper()
	var out string
	for id := range universe {
		m, ok := h.doc(id)
		w, wantOK := want[id]
		switch {
		case ok && !wantOK:
			out += fmt.Sprintf("key %d = %v should not exist\n", id, m)
		case !ok && wantOK:
			out += fmt.Sprintf("key %d missing (want %+v)\n", id, w)
		case ok:
			var g row
			g.Name, _ = m["name"].(string)
			if q, isNum := m["qty"].(float64); isNum {
				g.Qty = int64(q)
			}
			if g != w {
				out += fmt.Sprintf("key %d = %+v, want %+v\n", id, g, w)
			}
		}
	}
	return out
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

// metaDocs counts the target's checkpoint and key-index documents.
func (h *harness) metaDocs() (checkpoint bool, chunks int) {
	h.t.Helper()
	res, err := h.sink.meta(h.tgt).Exists(h.tgt.checkpointKey(), &gocb.ExistsOptions{Context: h.t.Context()})
	if err != nil {
		h.t.Fatalf("Exists: %v", err)
	}
	n, err := h.sink.countIndex(h.t.Context(), h.tgt)
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Exists(), n
}

// jsonOf is the JSON of v, for messages.
func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }
