package backfill

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// rangeChunk is one chunk a range reader read, or its error.
type rangeChunk struct {
	idx   int // the range
	limit int // the row limit it was read with: fewer rows end the range
	c     Chunk
	err   error
}

// copyRanges is Copy for a cursor with Ranges: lim.Parallel readers each take the next range
// that is neither done nor taken and read its chunks in key order; one writer groups the chunks
// in the order they arrive (bounded by lim.ApplyBytes and lim.FlushEvery, as copyGroup) and
// applies each group, then moves the cursor of every range in it. The rows of one snapshot need
// no order between ranges: each write is an upsert by key, and the snapshot's position is
// committed only at its end (EndSnapshot). At RunFor, Stop or the first error the readers start
// no new read; the chunks already read are applied (after an error: dropped) and Copy returns
// the cursor of what was applied. Reads are never cancelled mid-way (ctx does that).
func copyRanges(ctx context.Context, lim CopyLimits, deps CopyDeps, now func() time.Time, from Cursor) (Cursor, error) {
	at := from.clone()
	parallel := max(lim.Parallel, 1)
	chunks := make(chan rangeChunk, parallel)
	var stopping atomic.Bool
	// What the readers start from; the writer changes at.Ranges as it applies.
	starts, limit := slices.Clone(at.Ranges), chunkLimit(lim, at.Limit)
	var (
		mu    sync.Mutex
		taken = make([]bool, len(starts))
	)
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		for i, r := range starts {
			if !r.Done && !taken[i] {
				taken[i] = true
				return i
			}
		}
		return -1
	}
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for !stopping.Load() {
				i := take()
				if i < 0 {
					return
				}
				readRange(ctx, lim, deps, &stopping, i, starts[i], limit, chunks)
			}
		})
	}
	go func() {
		wg.Wait()
		close(chunks)
	}()
	start := now()
	w := rangeWriter{lim: lim, deps: deps, now: now, at: &at, begin: now()}
	for rc := range chunks {
		w.add(ctx, rc)
		if w.err != nil || stopped(deps.Stop) || (lim.RunFor > 0 && now().Sub(start) >= lim.RunFor) {
			stopping.Store(true)
		}
	}
	if w.err == nil {
		w.flush(ctx)
	}
	return at, w.err
}

// readRange reads range i from r's cursor until it ends, a read fails or stopping is set,
// sending each chunk (or the error) to chunks.
func readRange(ctx context.Context, lim CopyLimits, deps CopyDeps, stopping *atomic.Bool, i int, r RangeCursor, limit int, chunks chan<- rangeChunk) {
	after := r.Last
	for !stopping.Load() {
		c, err := deps.ReadRange(ctx, r.KeyRange, after, limit)
		// The writer owns c once it is sent: what the next read needs is taken before.
		end, next := err != nil || c.Rows < limit, nextLimit(lim, c, limit)
		after = c.Last
		chunks <- rangeChunk{idx: i, limit: limit, c: c, err: err}
		if end {
			return
		}
		limit = next
	}
}

// rangeWriter groups the chunks of copyRanges into sink writes and keeps the cursor of what is
// applied.
type rangeWriter struct {
	lim   CopyLimits
	deps  CopyDeps
	now   func() time.Time
	at    *Cursor
	group []rangeChunk
	size  int64
	begin time.Time
	err   error // the first failed read or write; later chunks are dropped
}

// add takes one chunk: into the group, applying the group when it is full.
func (w *rangeWriter) add(ctx context.Context, rc rangeChunk) {
	if rc.err == nil && w.err != nil {
		release(rc.c.Rec)
		return
	}
	if rc.err != nil {
		if w.err == nil {
			w.err = rc.err
		}
		w.drop()
		return
	}
	w.group = append(w.group, rc)
	if rc.c.Rec != nil {
		w.size += recordBytes(rc.c.Rec)
	}
	w.deps.Heartbeat(ctx, w.at.clone()) // keeps the attempt alive; the cursor moves only with a write
	if w.size >= w.lim.ApplyBytes || w.now().Sub(w.begin) >= w.lim.FlushEvery {
		w.flush(ctx)
	}
}

// flush applies the group as one record and moves the cursor of its ranges.
func (w *rangeWriter) flush(ctx context.Context) {
	defer w.drop()
	var recs []arrow.RecordBatch
	for _, rc := range w.group {
		if rc.c.Rows > 0 {
			recs = append(recs, rc.c.Rec)
		}
	}
	if len(recs) > 0 {
		rec, err := concatChunks(recs, w.deps.Mem)
		if err == nil {
			err = w.deps.Apply(ctx, rec)
			rec.Release()
		}
		if err != nil {
			w.err = err
			return
		}
	}
	done := true
	for _, rc := range w.group {
		r := &w.at.Ranges[rc.idx]
		if rc.c.Rows > 0 {
			r.Last = rc.c.Last
		}
		r.Done = rc.c.Rows < rc.limit
		w.at.Rows += int64(rc.c.Rows)
		w.at.Chunks++
		w.at.Limit = nextLimit(w.lim, rc.c, rc.limit)
	}
	for _, r := range w.at.Ranges {
		done = done && r.Done
	}
	w.at.Done = done
	if len(w.group) > 0 {
		w.deps.Heartbeat(ctx, w.at.clone())
	}
}

// drop releases the group's records and starts a new group.
func (w *rangeWriter) drop() {
	for _, rc := range w.group {
		release(rc.c.Rec)
	}
	w.group, w.size, w.begin = w.group[:0], 0, w.now()
}

func release(rec arrow.RecordBatch) {
	if rec != nil {
		rec.Release()
	}
}
