package positionstore_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/plugin"
	"github.com/sluicecdc/sluice/sinks/plugin/positionstore"
	"github.com/sluicecdc/sluice/sinks/plugin/sdk"
	"github.com/sluicecdc/sluice/sinks/sinktest"
)

// serve serves s over gRPC with the Go SDK until the test ends (or stop is called) and returns
// its address.
func serve(t *testing.T, s sinks.Sink, own bool) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sdk.Serve(ctx, s, sdk.ServeOptions{Listener: lis, OwnPosition: own, Name: "scripted-jsonl"})
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serving the plugin: %v", err)
		}
	}
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}

// connect opens the worker's client to addr and wraps it with a store of e, as the worker does:
// the handshake says whether the plugin has its own position.
func (e env) connect(t *testing.T, addr string) (sinks.Sink, bool) {
	t.Helper()
	c, err := plugin.Open(t.Context(), plugin.Config{Address: addr})
	if err != nil {
		t.Fatalf("plugin.Open: %v", err)
	}
	w := positionstore.Wrap(c, c.OwnPosition(), e.store(t, positionstore.Options{}))
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	if err := w.EnsureTable(t.Context(), e.spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	return w, c.OwnPosition()
}

// TestSinkPositionWinsOverGRPC is TestSinkPositionWins through the real path: a plugin served
// with the Go SDK without the capability commits through the store; a new version of it (the
// same files) announces the capability in its handshake, and the position it reports wins.
func TestSinkPositionWinsOverGRPC(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr, stop := serve(t, e.plugin(t), false)
	w, own := e.connect(t, addr)
	if own {
		t.Fatal("the plugin served without the capability announced it")
	}
	b1 := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x1000, 1), sinktest.Upsert(1, "a", 1, 0x1000, 1))
	b2 := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x2000, 1), sinktest.Upsert(1, "a2", 2, 0x2000, 1))
	apply(t, w, b1)
	apply(t, w, b2)
	wantPosition(t, w, e.spec, b2.Hi.Position, true)
	stop()

	upgraded := e.plugin(t)
	var reported *batch.Position
	upgraded.position = func() (batch.SourcePosition, bool) {
		if reported == nil {
			return batch.SourcePosition{}, false
		}
		return sourcePos(*reported), true
	}
	addr, _ = serve(t, upgraded, true)
	w, own = e.connect(t, addr)
	if !own {
		t.Fatal("the plugin served with the capability did not announce it")
	}
	wantPosition(t, w, e.spec, b2.Hi.Position, true) // it reports none yet: the store's
	reported = &b1.Hi.Position
	wantPosition(t, w, e.spec, b1.Hi.Position, true) // behind the store's: the sink wins
	apply(t, w, b2)
	if len(upgraded.applied) != 1 || upgraded.applied[0] != b2.Hi.Position {
		t.Fatalf("the plugin applied %v, want the batch up to %s that its own position asks for", upgraded.applied, b2.Hi.Position)
	}
	e.wantRows(t, map[int64]sinktest.Row{1: {Name: "a2", Qty: 2}})
}

// TestOpenExisting: a plugin with its own position opens only a store that exists.
func TestOpenExisting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := positionstore.Open(t.Context(), positionstore.Options{DSN: e.dsn, Pipeline: "p", Existing: true})
	if !errors.Is(err, positionstore.ErrNoStore) {
		t.Fatalf("Open(Existing) of a database without a store: %v, want ErrNoStore", err)
	}
	e.store(t, positionstore.Options{}).Close()
	st, err := positionstore.Open(t.Context(), positionstore.Options{DSN: e.dsn, Pipeline: "p", Existing: true})
	if err != nil {
		t.Fatalf("Open(Existing) of a store that exists: %v", err)
	}
	st.Close()
}
