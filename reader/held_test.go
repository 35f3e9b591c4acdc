package reader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

// fakeStore is a staging store in memory. Its function fields, when set, replace the defaults,
// so a test can script a failure or run something in the middle of a listing.
type fakeStore struct {
	mu   sync.Mutex
	refs map[string]staging.BatchRef // by URI
	puts []staging.BatchRef          // every Put, in order
	data [][]byte                    // the file of every Put, in order

	put  func(ctx context.Context, ref staging.BatchRef) (staging.BatchRef, error)
	list func(ctx context.Context, pipeline string) ([]staging.BatchRef, error)
}

func newFakeStore() *fakeStore { return &fakeStore{refs: map[string]staging.BatchRef{}} }

func (s *fakeStore) Put(ctx context.Context, ref staging.BatchRef, r io.Reader) (staging.BatchRef, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return staging.BatchRef{}, err
	}
	s.mu.Lock()
	s.data = append(s.data, data)
	s.mu.Unlock()
	if s.put != nil {
		return s.put(ctx, ref)
	}
	return s.add(ref), nil
}

// add stages ref under a URI made of its table and range.
func (s *fakeStore) add(ref staging.BatchRef) staging.BatchRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref.URI == "" {
		ref.URI = fmt.Sprintf("mem://%s/%s", ref.Table, ref.Range())
	}
	s.refs[ref.URI] = ref
	s.puts = append(s.puts, ref)
	return ref
}

// ack removes a batch, as its table's commit does once it committed it.
func (s *fakeStore) ack(uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.refs, uri)
}

func (s *fakeStore) ListPipeline(ctx context.Context, pipeline string) ([]staging.BatchRef, error) {
	if s.list != nil {
		return s.list(ctx, pipeline)
	}
	return s.contents(), nil
}

// contents lists the staged batches.
func (s *fakeStore) contents() []staging.BatchRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.refs))
}

// fakeClock advances a second every time it is read, so every event has its own time.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func pos(lsn uint64) batch.Position { return batch.Position{LSN: lsn} }

func tableName(name string) batch.TableName { return batch.TableName{Schema: "public", Name: name} }

func batchRef(table string, lo uint64) staging.BatchRef {
	return staging.BatchRef{Pipeline: "p", Table: tableName(table), URI: fmt.Sprintf("mem://%s/%d", table, lo),
		Lo: batch.SourcePosition{Position: pos(lo)}, Hi: batch.SourcePosition{Position: pos(lo + 5)}}
}

// heldWorld is a held tracker with its staging store and clock: what a run's steps act on.
type heldWorld struct {
	h     *held
	store *fakeStore
	clock *fakeClock
}

func newHeldWorld() *heldWorld {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	return &heldWorld{h: newHeld(c.now), store: newFakeStore(), clock: c}
}

// heldStep is one thing that happens to the tracker's world.
type heldStep struct {
	name string
	do   func(t *testing.T, w *heldWorld)
	// buffers is the position the step buffers for table, if any; stages says it staged it.
	table   string
	buffers uint64
	stages  bool
	lists   bool
}

// buffer: the table buffers a change at lsn (its first buffered change).
func buffer(table string, lsn uint64) heldStep {
	return heldStep{name: fmt.Sprintf("%s buffers %d", table, lsn), table: table, buffers: lsn, do: func(_ *testing.T, w *heldWorld) {
		w.h.setBuffered(tableName(table), pos(lsn), true)
	}}
}

// stage: the table's buffer is cut at lo and staged, as run.stage does it (held at the cut's lo
// while it is staged, then as staged); nothing stays buffered.
func stage(table string, lo uint64) heldStep {
	return heldStep{name: fmt.Sprintf("%s stages %d", table, lo), table: table, stages: true, do: func(_ *testing.T, w *heldWorld) {
		w.h.setBuffered(tableName(table), pos(lo), true)
		ref := w.store.add(batchRef(table, lo))
		w.h.addStaged(ref, w.clock.now())
		w.h.setBuffered(tableName(table), batch.Position{}, false)
	}}
}

// ack: the table committed its batch at lo and acknowledged it (the staged file is removed).
func ack(table string, lo uint64) heldStep {
	return heldStep{name: fmt.Sprintf("%s acknowledges %d", table, lo), do: func(_ *testing.T, w *heldWorld) {
		w.store.ack(batchRef(table, lo).URI)
	}}
}

// fail: the table's commit of its batch at lo failed (a poison batch, a sink down): the staged
// file stays until the operator resumes the table.
func fail(table string, lo uint64) heldStep {
	return heldStep{name: fmt.Sprintf("%s fails %d", table, lo), do: func(*testing.T, *heldWorld) {}}
}

// leftover: an earlier run staged a batch of the table that is still unacknowledged.
func leftover(table string, lo uint64) heldStep {
	return heldStep{name: fmt.Sprintf("%s left %d staged", table, lo), do: func(_ *testing.T, w *heldWorld) {
		w.store.add(batchRef(table, lo))
	}}
}

// list: the reader lists the staging store.
func list() heldStep {
	return heldStep{name: "list", lists: true, do: func(t *testing.T, w *heldWorld) {
		if _, err := w.h.refresh(context.Background(), w.store, "p", 0); err != nil {
			t.Fatal(err)
		}
	}}
}

// stageDuringList: the table stages a batch at lo while a listing runs, after the store was read:
// the listing does not show the batch, which must not make the tracker forget it.
func stageDuringList(table string, lo uint64) heldStep {
	return heldStep{name: fmt.Sprintf("%s stages %d during a listing", table, lo), do: func(t *testing.T, w *heldWorld) {
		w.store.list = func(context.Context, string) ([]staging.BatchRef, error) {
			refs := w.store.contents()
			stage(table, lo).do(t, w)
			return refs, nil
		}
		defer func() { w.store.list = nil }()
		if _, err := w.h.refresh(context.Background(), w.store, "p", 0); err != nil {
			t.Fatal(err)
		}
	}}
}

// failedList: listing the store fails; the tracker keeps what it knew.
func failedList() heldStep {
	return heldStep{name: "listing fails", do: func(t *testing.T, w *heldWorld) {
		w.store.list = func(context.Context, string) ([]staging.BatchRef, error) { return nil, errors.New("store down") }
		defer func() { w.store.list = nil }()
		if _, err := w.h.refresh(context.Background(), w.store, "p", 0); err == nil {
			t.Fatal("refresh of a failing store returned no error")
		}
	}}
}

// want is what safe answers after a step: the lowest held position, or none.
type want struct {
	lsn  uint64
	none bool
}

func heldAt(lsn uint64) want { return want{lsn: lsn} }

var nothingHeld = want{none: true}

func (w want) String() string {
	if w.none {
		return "nothing held"
	}
	return "held at " + pos(w.lsn).String()
}

func TestHeldConfirmsOnlyBelowWhatATableStillHolds(t *testing.T) {
	t.Parallel()
	type check struct {
		step heldStep
		want want
	}
	tests := []struct {
		name  string
		steps []check
	}{
		{name: "nothing buffered or staged holds nothing", steps: []check{
			{list(), nothingHeld},
		}},
		{name: "a buffered change holds until its batch is staged, the batch until it is acknowledged and listed", steps: []check{
			{buffer("a", 10), heldAt(10)},
			{stage("a", 10), heldAt(10)},
			{list(), heldAt(10)},
			{ack("a", 10), heldAt(10)}, // not listed since: still held
			{list(), nothingHeld},
		}},
		{name: "the lowest of several tables holds", steps: []check{
			{buffer("a", 30), heldAt(30)},
			{buffer("b", 10), heldAt(10)},
			{stage("b", 10), heldAt(10)},
			{buffer("c", 20), heldAt(10)},
			{ack("b", 10), heldAt(10)},
			{list(), heldAt(20)},
			{stage("c", 20), heldAt(20)},
			{stage("a", 30), heldAt(20)},
			{ack("a", 30), heldAt(20)},
			{list(), heldAt(20)},
			{ack("c", 20), heldAt(20)},
			{list(), nothingHeld},
		}},
		{name: "an idle table does not hold the slot back", steps: []check{
			{buffer("a", 10), heldAt(10)},
			{stage("a", 10), heldAt(10)},
			{ack("a", 10), heldAt(10)},
			{list(), nothingHeld}, // table b never had a change: nothing of it is held
			{buffer("a", 50), heldAt(50)},
		}},
		{name: "a failed table holds the slot while the others go on", steps: []check{
			{buffer("a", 10), heldAt(10)},
			{stage("a", 10), heldAt(10)},
			{fail("a", 10), heldAt(10)},
			{buffer("b", 20), heldAt(10)},
			{stage("b", 20), heldAt(10)},
			{ack("b", 20), heldAt(10)},
			{list(), heldAt(10)},
			{buffer("b", 30), heldAt(10)},
			{stage("b", 30), heldAt(10)},
			{ack("b", 30), heldAt(10)},
			{list(), heldAt(10)},
			{ack("a", 10), heldAt(10)}, // resumed and committed
			{list(), nothingHeld},
		}},
		{name: "a batch an earlier run left staged holds once listed", steps: []check{
			{leftover("a", 5), nothingHeld}, // not listed yet
			{list(), heldAt(5)},
			{buffer("a", 10), heldAt(5)},
			{ack("a", 5), heldAt(5)},
			{list(), heldAt(10)},
		}},
		{name: "a table removed from the pipeline holds with what it left staged until that is gone", steps: []check{
			{leftover("gone", 5), nothingHeld},
			{list(), heldAt(5)},
			{buffer("a", 10), heldAt(5)},
			{stage("a", 10), heldAt(5)},
			{ack("a", 10), heldAt(5)},
			{list(), heldAt(5)},
			{ack("gone", 5), heldAt(5)},
			{list(), nothingHeld},
		}},
		{name: "a batch staged during a listing that missed it is not forgotten", steps: []check{
			{buffer("a", 10), heldAt(10)},
			{stageDuringList("a", 10), heldAt(10)},
			{list(), heldAt(10)},
			{ack("a", 10), heldAt(10)},
			{list(), nothingHeld},
		}},
		{name: "an acknowledged batch stays held after a failed listing", steps: []check{
			{buffer("a", 10), heldAt(10)},
			{stage("a", 10), heldAt(10)},
			{list(), heldAt(10)},
			{ack("a", 10), heldAt(10)},
			{failedList(), heldAt(10)},
			{list(), nothingHeld},
		}},
		{name: "a buffered change below a staged batch holds", steps: []check{
			{buffer("a", 20), heldAt(20)},
			{stage("a", 20), heldAt(20)},
			{buffer("b", 15), heldAt(15)},
			{list(), heldAt(15)},
			{stage("b", 15), heldAt(15)},
			{ack("b", 15), heldAt(15)},
			{list(), heldAt(20)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newHeldWorld()
			var done []string
			for _, c := range tt.steps {
				c.step.do(t, w)
				done = append(done, c.step.name)
				low, found := w.h.safe()
				got := want{lsn: low.LSN, none: !found}
				if !found {
					got.lsn = 0
				}
				if got != c.want {
					t.Fatalf("after %s: %s, want %s", strings.Join(done, ", "), got, c.want)
				}
			}
		})
	}
}

// TestHeldNeverConfirmsPastAHeldChangeInAnyInterleaving runs every interleaving of three
// tables' lives and two listings: a acknowledges its batch, b's commit fails (the batch stays),
// and a table removed from the pipeline left a batch staged that is deleted at some point; table
// idle never has a change. After every step safe must be at or below every change still buffered or staged; right after a listing it must be exactly
// the lowest of them, so the slot moves as soon as the tables let it.
func TestHeldNeverConfirmsPastAHeldChangeInAnyInterleaving(t *testing.T) {
	t.Parallel()
	lives := [][]heldStep{
		{buffer("a", 10), stage("a", 10), ack("a", 10)},
		{buffer("b", 40), stage("b", 40), fail("b", 40)},
		{ack("gone", 30)},
		{list(), list()},
	}
	n := 0
	for order := range interleavings(lives) {
		n++
		w := newHeldWorld()
		leftover("gone", 30).do(t, w)
		list().do(t, w) // a run lists before it streams
		var done []string
		buffered := map[string]uint64{}
		for _, s := range order {
			s.do(t, w)
			done = append(done, s.name)
			// The changes really held: buffered, or staged and not acknowledged.
			switch {
			case s.buffers != 0:
				buffered[s.table] = s.buffers
			case s.stages:
				delete(buffered, s.table)
			}
			truth := slices.Collect(maps.Values(buffered))
			for _, r := range w.store.contents() {
				truth = append(truth, r.Lo.Position.LSN)
			}
			low, found := w.h.safe()
			if len(truth) > 0 {
				lowest := slices.Min(truth)
				if !found || lowest < low.LSN {
					t.Fatalf("after %s: safe is %v (found %v), but %d is still held", strings.Join(done, ", "), low, found, lowest)
				}
				if s.lists && low.LSN != lowest {
					t.Fatalf("after %s: safe is %v right after a listing, want exactly %d", strings.Join(done, ", "), low, lowest)
				}
			} else if s.lists && found {
				t.Fatalf("after %s: safe is %v right after a listing, but nothing is held", strings.Join(done, ", "), low)
			}
		}
	}
	if n != 5040 {
		t.Fatalf("ran %d interleavings, want 5040", n)
	}
}

// interleavings yields every order of the steps of lives that keeps each life's own order.
func interleavings(lives [][]heldStep) func(yield func([]heldStep) bool) {
	return func(yield func([]heldStep) bool) {
		next := make([]int, len(lives))
		total := 0
		for _, l := range lives {
			total += len(l)
		}
		order := make([]heldStep, 0, total)
		var walk func() bool
		walk = func() bool {
			if len(order) == total {
				return yield(slices.Clone(order))
			}
			for i, l := range lives {
				if next[i] == len(l) {
					continue
				}
				order = append(order, l[next[i]])
				next[i]++
				ok := walk()
				next[i]--
				order = order[:len(order)-1]
				if !ok {
					return false
				}
			}
			return true
		}
		walk()
	}
}
