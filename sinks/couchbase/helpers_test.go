package couchbase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// row is the visible state of one key: the document's name and qty.
type row struct {
	Name string
	Qty  int64
}

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
	h.spec = orders.Spec(testenv.RandomName("t") + ".orders")
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
	s, err := New(t.Context(), cfg, Options{Logger: sinktest.Logger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// batch builds the next batch of changes (one transaction, increasing positions).
func (h *harness) batch(phase batch.Phase, changes ...batch.Change) sinks.Batch {
	h.t.Helper()
	h.lsn += 0x100
	return orders.Batch(h.t, h.spec, phase, h.lsn, changes...)
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
	return sinktest.Position(h.t, h.sink, h.spec)
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
