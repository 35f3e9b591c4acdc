package positionstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/examples/plugins/jsonl/jsonlsink"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/plugin/positionstore"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// scripted is a plugin sink (the JSON Lines example's, writing real files) whose calls a test
// scripts: beforeApply runs before each Apply reaches the files (an error stops it there), and
// position, when set, is the position the plugin reports (a plugin with the capability).
type scripted struct {
	sinks.Sink
	beforeApply func(ctx context.Context, b sinks.Batch) error
	position    func() (batch.SourcePosition, bool)
	mu          sync.Mutex
	applied     []batch.Position // the Hi of every Apply that reached the files
}

func (s *scripted) Apply(ctx context.Context, b sinks.Batch) error {
	if s.beforeApply != nil {
		if err := s.beforeApply(ctx, b); err != nil {
			return err
		}
	}
	if err := s.Sink.Apply(ctx, b); err != nil {
		return err
	}
	s.mu.Lock()
	s.applied = append(s.applied, b.Hi.Position)
	s.mu.Unlock()
	return nil
}

func (s *scripted) Position(ctx context.Context, spec sinks.TableSpec) (batch.SourcePosition, bool, error) {
	if s.position == nil {
		return s.Sink.Position(ctx, spec)
	}
	p, ok := s.position()
	return p, ok, nil
}

// env is one test's plugin destination and store database.
type env struct {
	root, dsn string
	spec      sinks.TableSpec
}

func newEnv(t *testing.T) env {
	t.Helper()
	return env{root: t.TempDir(), dsn: testenv.NewDatabase(t), spec: sinktest.Spec(testenv.RandomName("t_"))}
}

// plugin returns a scripted JSON Lines sink of e.
func (e env) plugin(t *testing.T) *scripted {
	t.Helper()
	s, err := jsonlsink.New(e.root)
	if err != nil {
		t.Fatal(err)
	}
	return &scripted{Sink: s}
}

func (e env) store(t *testing.T, o positionstore.Options) *positionstore.Store {
	t.Helper()
	o.DSN = e.dsn
	if o.Pipeline == "" {
		o.Pipeline = "orders"
	}
	st, err := positionstore.Open(t.Context(), o)
	if err != nil {
		t.Fatalf("opening the position store: %v", err)
	}
	return st
}

// wrap returns p wrapped with a store of e, and ensures the table.
func (e env) wrap(t *testing.T, p sinks.Sink, own bool, o positionstore.Options) sinks.Sink {
	t.Helper()
	w := positionstore.Wrap(p, own, e.store(t, o))
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	if err := w.EnsureTable(t.Context(), e.spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	return w
}

// storePosition reads the store's position of the test's target on a connection of its own.
func (e env) storePosition(t *testing.T) (batch.Position, bool) {
	t.Helper()
	st := e.store(t, positionstore.Options{})
	defer st.Close()
	p, ok, err := st.Position(t.Context(), e.spec.Target)
	if err != nil {
		t.Fatalf("reading the store: %v", err)
	}
	return p.Position, ok
}

func (e env) wantStore(t *testing.T, want batch.Position, wantOK bool) {
	t.Helper()
	if got, ok := e.storePosition(t); ok != wantOK || got != want {
		t.Fatalf("the store holds %v (ok %v), want %v (ok %v)", got, ok, want, wantOK)
	}
}

func (e env) wantRows(t *testing.T, want map[int64]sinktest.Row) {
	t.Helper()
	rows, err := jsonlsink.ReadTable(e.root, e.spec.Target)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]sinktest.Row{}
	for _, l := range rows {
		var r struct {
			ID   int64
			Name string
			Qty  int32
		}
		if err := unmarshalRow(l, &r); err != nil {
			t.Fatal(err)
		}
		got[r.ID] = sinktest.Row{Name: r.Name, Qty: r.Qty}
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			t.Errorf("id %d: got %+v (present %v), want %+v", id, g, ok, w)
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("id %d: extra row %+v", id, g)
		}
	}
}

func pos(lsn uint64, seq uint32) batch.Position { return batch.Position{LSN: lsn, Seq: seq} }

func sourcePos(p batch.Position) batch.SourcePosition {
	return batch.SourcePosition{Source: sinktest.Source, Position: p}
}

func apply(t *testing.T, s sinks.Sink, b sinks.Batch) {
	t.Helper()
	if err := s.Apply(t.Context(), b); err != nil {
		t.Fatalf("Apply(..%s): %v", b.Hi, err)
	}
}

func wantPosition(t *testing.T, s sinks.Sink, spec sinks.TableSpec, want batch.Position, wantOK bool) {
	t.Helper()
	got, ok, err := s.Position(t.Context(), spec)
	if err != nil {
		t.Fatalf("Position: %v", err)
	}
	if ok != wantOK || got.Position != want {
		t.Fatalf("Position = %v (ok %v), want %v (ok %v)", got.Position, ok, want, wantOK)
	}
}

// TestStoreWrittenOnlyAfterThePluginAcknowledged: while the plugin applies a batch the store
// still holds the previous position, and a batch the plugin did not acknowledge (it failed, it
// was cut off) leaves the store where it was; the retry then writes rows and position.
func TestStoreWrittenOnlyAfterThePluginAcknowledged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		failing bool // the plugin fails the batch before writing it
	}{
		{"the plugin acknowledges", false},
		{"the plugin fails", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			p := e.plugin(t)
			w := e.wrap(t, p, false, positionstore.Options{})
			first := pos(0x1000, 1)
			apply(t, w, sinktest.Batch(t, e.spec, batch.PhaseStream, first, sinktest.Upsert(1, "a", 1, 0x1000, 1)))

			var during []batch.Position
			p.beforeApply = func(ctx context.Context, b sinks.Batch) error {
				got, _ := e.storePosition(t)
				during = append(during, got)
				if tc.failing {
					return errors.New("plugin unreachable")
				}
				return nil
			}
			second := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x2000, 2), sinktest.Upsert(1, "a2", 2, 0x2000, 1), sinktest.Upsert(2, "b", 3, 0x2000, 2))
			err := w.Apply(t.Context(), second)
			if len(during) != 1 || during[0] != first {
				t.Fatalf("while the plugin applied the batch up to %s the store held %v, want %s: the store ran ahead of the data", second.Hi.Position, during, first)
			}
			if tc.failing {
				if err == nil {
					t.Fatal("Apply succeeded though the plugin failed")
				}
				e.wantStore(t, first, true)
				e.wantRows(t, map[int64]sinktest.Row{1: {Name: "a", Qty: 1}})
				p.beforeApply = nil // the retry
				apply(t, w, second)
			} else if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			e.wantStore(t, second.Hi.Position, true)
			e.wantRows(t, map[int64]sinktest.Row{1: {Name: "a2", Qty: 2}, 2: {Name: "b", Qty: 3}})
		})
	}
}

// TestSinkPositionWins: a plugin without the capability commits through the store; the same
// destination's plugin then gains the capability. Its own position wins over the store's,
// whether behind it (its destination restored from a backup) or ahead; only while it reports
// none does the store's stand in.
func TestSinkPositionWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.wrap(t, e.plugin(t), false, positionstore.Options{})
	b1 := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x1000, 1), sinktest.Upsert(1, "a", 1, 0x1000, 1))
	b2 := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x2000, 1), sinktest.Upsert(1, "a2", 2, 0x2000, 1))
	apply(t, old, b1)
	apply(t, old, b2)
	wantPosition(t, old, e.spec, b2.Hi.Position, true)

	// A plugin without the capability is never asked for a position, whatever it would say.
	p := e.plugin(t)
	p.position = func() (batch.SourcePosition, bool) { return sourcePos(pos(0x500, 0)), true }
	wantPosition(t, e.wrap(t, p, false, positionstore.Options{}), e.spec, b2.Hi.Position, true)

	upgraded := e.plugin(t)
	var reported *batch.Position
	upgraded.position = func() (batch.SourcePosition, bool) {
		if reported == nil {
			return batch.SourcePosition{}, false
		}
		return sourcePos(*reported), true
	}
	w := e.wrap(t, upgraded, true, positionstore.Options{})
	wantPosition(t, w, e.spec, b2.Hi.Position, true) // reports none yet: the store's
	for _, r := range []batch.Position{b1.Hi.Position, pos(0x3000, 7)} {
		reported = &r
		wantPosition(t, w, e.spec, r, true)
	}

	// Behind the store, the plugin's position decides what is applied: the committer replays
	// b2 after b1, and the store's position, ahead, must not skip it.
	reported = &b1.Hi.Position
	apply(t, w, b2)
	if len(upgraded.applied) != 1 || upgraded.applied[0] != b2.Hi.Position {
		t.Fatalf("the plugin applied %v, want the replayed batch up to %s: the store's position skipped a batch the plugin's own position asks for", upgraded.applied, b2.Hi.Position)
	}
	e.wantStore(t, b2.Hi.Position, true) // never moved back
	e.wantRows(t, map[int64]sinktest.Row{1: {Name: "a2", Qty: 2}})
}

// TestStaleAttemptTakesTurns: an attempt of batch N that outlived its heartbeat timeout is
// inside the plugin's Apply when its retry commits N and N+1. The retry waits for it on the
// store's row lock and then finds N covered, so N's older images never land after N+1: the
// key N+1 deletes stays deleted and the key N+1 updates keeps N+1's value.
func TestStaleAttemptTakesTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const j, k, l = 1, 2, 3
	setup := e.wrap(t, e.plugin(t), false, positionstore.Options{})
	apply(t, setup, sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x1000, 1), sinktest.Upsert(j, "j0", 10, 0x1000, 1)))
	n := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x2000, 3),
		sinktest.Upsert(k, "k-n", 20, 0x2000, 1), sinktest.Upsert(j, "j-n", 11, 0x2000, 2), sinktest.Upsert(l, "l-n", 30, 0x2000, 3))
	next := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x3000, 2),
		sinktest.Delete(k, 0x3000, 1), sinktest.Upsert(j, "j-n1", 12, 0x3000, 2))

	inside, resume := make(chan struct{}), make(chan struct{})
	stalePlugin := e.plugin(t)
	stalePlugin.beforeApply = func(ctx context.Context, b sinks.Batch) error {
		close(inside) // past the guard, before the write
		<-resume
		return nil
	}
	stale := e.wrap(t, stalePlugin, false, positionstore.Options{})
	retry := e.wrap(t, e.plugin(t), false, positionstore.Options{LockTimeout: time.Minute})

	staleErr := make(chan error, 1)
	go func() { staleErr <- stale.Apply(context.Background(), n) }()
	<-inside
	retryErr := make(chan error, 1)
	go func() {
		if err := retry.Apply(context.Background(), n); err != nil {
			retryErr <- err
			return
		}
		retryErr <- retry.Apply(context.Background(), next)
	}()
	// The retry either waits on the lock (the store keeps turns) or, were it not kept, commits.
	var (
		retryDone error
		finished  bool
	)
	waitFor(t, "the retry to wait for the stale attempt's lock or to finish", func() bool {
		select {
		case retryDone = <-retryErr:
			finished = true
			return true
		default:
		}
		return waitingOnLock(t, e.dsn)
	})
	close(resume)
	if err := <-staleErr; err != nil {
		t.Fatalf("the stale attempt: %v", err)
	}
	if !finished {
		retryDone = <-retryErr
	}
	if retryDone != nil {
		t.Fatalf("the retry: %v", retryDone)
	}
	e.wantRows(t, map[int64]sinktest.Row{j: {Name: "j-n1", Qty: 12}, l: {Name: "l-n", Qty: 30}})
	e.wantStore(t, next.Hi.Position, true)
}

// TestStoreNeverMovesBack: with a plugin that keeps its own position (and so its own guard),
// the wrapper does not skip by the store's position, and a stale batch's Hi behind the store's
// does not move it back.
func TestStoreNeverMovesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.wrap(t, e.plugin(t), true, positionstore.Options{})
	later := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x3000, 1), sinktest.Upsert(1, "b", 2, 0x3000, 1))
	earlier := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x2000, 1), sinktest.Upsert(1, "a", 1, 0x2000, 1))
	apply(t, w, later)
	apply(t, w, earlier)
	e.wantStore(t, later.Hi.Position, true)
}

// TestStoreErrors: a commit that cannot take its table's turn within the lock timeout is
// transient (retried) and names the target; a batch of another source than the stored position
// is poison.
func TestStoreErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inside, resume := make(chan struct{}), make(chan struct{})
	holder := e.plugin(t)
	holder.beforeApply = func(context.Context, sinks.Batch) error {
		close(inside)
		<-resume
		return nil
	}
	held := e.wrap(t, holder, false, positionstore.Options{})
	b := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x1000, 1), sinktest.Upsert(1, "a", 1, 0x1000, 1))
	done := make(chan error, 1)
	go func() { done <- held.Apply(context.Background(), b) }()
	<-inside
	waiting := e.wrap(t, e.plugin(t), false, positionstore.Options{LockTimeout: 200 * time.Millisecond})
	err := waiting.Apply(t.Context(), b)
	close(resume)
	if err == nil || sinks.IsPoison(err) || !strings.Contains(err.Error(), "held by another commit attempt") || !strings.Contains(err.Error(), e.spec.Target) {
		t.Errorf("Apply while another attempt holds the position: %v (poison %v), want a transient error naming target %s", err, sinks.IsPoison(err), e.spec.Target)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	other := sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x2000, 1), sinktest.Upsert(1, "b", 1, 0x2000, 1))
	other.Lo.Source.Slot, other.Hi.Source.Slot = "another_slot", "another_slot"
	if err := waiting.Apply(t.Context(), other); !sinks.IsPoison(err) {
		t.Errorf("Apply of a batch of another source: %v, want poison", err)
	}
	e.wantStore(t, b.Hi.Position, true)
}

// TestPipelinesKeepTheirOwnPositions: two pipelines writing a target of the same name through
// one store database do not see each other's positions; a schema other than the default works.
func TestPipelinesKeepTheirOwnPositions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.wrap(t, e.plugin(t), false, positionstore.Options{Pipeline: "a", Schema: "positions"})
	b := e.wrap(t, e.plugin(t), false, positionstore.Options{Pipeline: "b", Schema: "positions"})
	apply(t, a, sinktest.Batch(t, e.spec, batch.PhaseStream, pos(0x1000, 1), sinktest.Upsert(1, "a", 1, 0x1000, 1)))
	wantPosition(t, a, e.spec, pos(0x1000, 1), true)
	wantPosition(t, b, e.spec, batch.Position{}, false)
}

// waitingOnLock reports whether a position store connection waits for a row lock.
func waitingOnLock(t *testing.T, dsn string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'sluice-position-store' AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// waitFor polls cond until it holds, failing the test with reason after a minute.
func waitFor(t *testing.T, reason string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
