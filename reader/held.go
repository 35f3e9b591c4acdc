package reader

import (
	"context"
	"sync"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/metrics"
	"github.com/sluicecdc/sluice/staging"
)

// Lister lists a pipeline's staged batches: the ones no table has acknowledged yet, from this
// run and earlier ones (staging.Store.ListPipeline). It is called concurrently with Put.
type Lister interface {
	ListPipeline(ctx context.Context, pipeline string) ([]staging.BatchRef, error)
}

// held tracks what the reader may not yet confirm to the slot: changes buffered in memory and
// batches staged but not yet acknowledged by their table's commit. It answers the source
// reader's SafeFunc and is safe for concurrent use.
//
// Staged batches are known two ways: the ones this run staged (remembered at Put) and the
// pipeline's listing of the staging store (which also holds earlier runs' batches). A batch this
// run staged is forgotten only when a listing that began after its Put no longer shows it, i.e.
// when its commit acknowledged it. A batch whose commit failed stays staged, so it stays in every
// listing and holds the slot until its table commits it.
type held struct {
	now      func() time.Time
	mu       sync.Mutex
	buffered map[batch.TableName]batch.Position // first buffered change per table
	staged   map[string]stagedAt                // this run's batches by URI
	listed   []batch.Position                   // lows of the last listing
	seen     map[string]time.Time               // when this run staged or first listed each listed batch
}

type stagedAt struct {
	lo batch.Position
	at time.Time
}

// newHeld returns an empty tracker that reads the time from now.
func newHeld(now func() time.Time) *held {
	return &held{now: now, buffered: map[batch.TableName]batch.Position{}, staged: map[string]stagedAt{},
		seen: map[string]time.Time{}}
}

// setBuffered records the first buffered change of a table, or that none is buffered.
func (h *held) setBuffered(t batch.TableName, first batch.Position, any bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if any {
		h.buffered[t] = first
	} else {
		delete(h.buffered, t)
	}
}

// addStaged records a batch this run staged.
func (h *held) addStaged(ref staging.BatchRef, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.staged[ref.URI] = stagedAt{lo: ref.Lo.Position, at: at}
}

// refresh lists the pipeline's staged batches and forgets this run's batches that were
// acknowledged since. It returns what each table holds in staging, for the metrics: reading at
// is the reader's position, from which a table's lag in WAL bytes is counted.
func (h *held) refresh(ctx context.Context, store Lister, pipeline string, reading uint64) (map[string]metrics.TableHold, error) {
	began := h.now()
	refs, err := store.ListPipeline(ctx, pipeline)
	if err != nil {
		return nil, err
	}
	present := make(map[string]bool, len(refs))
	lows := make([]batch.Position, 0, len(refs))
	for _, r := range refs {
		present[r.URI] = true
		lows = append(lows, r.Lo.Position)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listed = lows
	for uri, s := range h.staged {
		if s.at.Before(began) && !present[uri] {
			delete(h.staged, uri)
		}
	}
	seen := make(map[string]time.Time, len(refs))
	holds := map[string]metrics.TableHold{}
	for _, r := range refs {
		at, ok := h.seen[r.URI]
		if s, staged := h.staged[r.URI]; !ok && staged {
			at, ok = s.at, true
		}
		if !ok {
			at = began
		}
		seen[r.URI] = at
		t := r.Table.String()
		hold := holds[t]
		hold.Batches++
		hold.Bytes += r.Bytes
		if reading > r.Lo.Position.LSN {
			hold.LagBytes = max(hold.LagBytes, reading-r.Lo.Position.LSN)
		}
		hold.Age = max(hold.Age, began.Sub(at))
		holds[t] = hold
	}
	h.seen = seen
	return holds, nil
}

// safe is the source reader's SafeFunc: the lowest position held anywhere, and whether anything
// is held.
func (h *held) safe() (batch.Position, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var low batch.Position
	found := false
	take := func(p batch.Position) {
		if !found || p.Less(low) {
			low, found = p, true
		}
	}
	for _, p := range h.buffered {
		take(p)
	}
	for _, s := range h.staged {
		take(s.lo)
	}
	for _, p := range h.listed {
		take(p)
	}
	return low, found
}
