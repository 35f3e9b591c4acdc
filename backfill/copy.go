package backfill

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
)

// Cursor is where a snapshot's copy stands: every row up to Last (in key order) is applied to
// the sink. It is the heartbeat detail of the copy activity, so a retried attempt on the worker
// that holds the snapshot resumes from it instead of from the first row.
type Cursor struct {
	// Last holds the key columns' text values of the last row applied; empty before the first.
	Last []string `json:"last,omitempty"`
	// Rows and Chunks count what was applied since the cursor the copy was started from.
	Rows   int64 `json:"rows"`
	Chunks int64 `json:"chunks"`
	// Done: the snapshot has no rows after Last (with Ranges: every range is done).
	Done bool `json:"done,omitempty"`
	// Ranges, when set, are the key ranges of a parallel copy (CopyLimits.Parallel), each with
	// its own cursor; Last is then unused. The first call of a copy sets them (SplitKeyRanges)
	// and every later call and retried attempt keeps them, so a range's Last stays within it.
	Ranges []RangeCursor `json:"ranges,omitempty"`
	// Limit is the row limit of the next chunk, sized by bytes (CopyLimits.ChunkBytes); 0 is
	// CopyLimits.ChunkRows.
	Limit int `json:"limit,omitempty"`
}

// RangeCursor is where the copy of one key range stands: every row of the range up to Last is
// applied, or all of them when Done.
type RangeCursor struct {
	source.KeyRange
	Last []string `json:"last,omitempty"`
	Done bool     `json:"done,omitempty"`
}

// clone returns a copy of c whose Ranges the copy may change.
func (c Cursor) clone() Cursor {
	c.Ranges = slices.Clone(c.Ranges)
	return c
}

// CopyLimits bound one call of Copy.
type CopyLimits struct {
	// ChunkRows is the most rows per chunk (keyset page).
	ChunkRows int
	// ChunkBytes sizes chunks by bytes: each chunk's row limit is what ChunkBytes holds at the
	// previous chunk's bytes per row (at most ChunkRows); 0 sizes them by ChunkRows alone.
	ChunkBytes int64
	// Parallel is how many ranges of a cursor with Ranges are read at once (at least 1).
	Parallel int
	// ApplyBytes groups consecutive chunks into one sink write until their records hold this
	// many bytes (at least one chunk per write).
	ApplyBytes int64
	// FlushEvery applies the chunks read so far at least this often, so the cursor (and the
	// heartbeat that carries it) moves on a slow source too; 0 means 10 seconds.
	FlushEvery time.Duration
	// RunFor ends the call, between two writes, after this long; 0 means until the snapshot
	// is copied. The caller calls again from the returned cursor.
	RunFor time.Duration
}

// CopyDeps are what Copy reads from and writes to. Read and ReadAhead are a Session's
// (ReadChunk and ReadAheadFrom, bound to the table's schema); tests pass fakes.
type CopyDeps struct {
	// Read returns up to limit rows after the key after.
	Read func(ctx context.Context, after []string, limit int) (Chunk, error)
	// ReadAhead starts reading the chunk after the key after in the background (optional).
	ReadAhead func(ctx context.Context, after []string, limit int)
	// ReadRange returns up to limit rows of the key range r after the key after; it is called
	// from several goroutines at once for a cursor with Ranges (one read per range at a time).
	ReadRange func(ctx context.Context, r source.KeyRange, after []string, limit int) (Chunk, error)
	// Apply writes a record of snapshot rows to the sink, idempotently (upsert by key): a
	// retried attempt may write rows after its cursor again.
	Apply func(ctx context.Context, rec arrow.RecordBatch) error
	// Heartbeat reports the cursor of what is applied; called after every read and write.
	Heartbeat func(ctx context.Context, c Cursor)
	// Mem allocates concatenated records; nil means memory.DefaultAllocator.
	Mem memory.Allocator
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Stop, once closed, ends the copy at the next chunk: the chunks read so far are written
	// and Copy returns their cursor with a nil error. It never interrupts a read or a write
	// (ctx does: a read cancelled mid-query may close the snapshot's connection). Optional.
	Stop <-chan struct{}
}

// Copy copies the snapshot from the cursor from: it reads chunks in key order, groups them into
// sink writes bounded by lim.ApplyBytes and lim.FlushEvery, and returns the cursor after the
// last write, when the snapshot is done or lim.RunFor has passed. The returned cursor counts
// from's Rows and Chunks too. A failed read or write returns the error and the cursor of what
// was applied before it (the last heartbeat's). Closing deps.Stop ends it after the chunk it
// is reading, with the cursor of that chunk's write.
func Copy(ctx context.Context, lim CopyLimits, deps CopyDeps, from Cursor) (Cursor, error) {
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	if lim.ChunkRows <= 0 {
		return from, fmt.Errorf("copying a snapshot: chunk rows %d, want at least 1", lim.ChunkRows)
	}
	if lim.FlushEvery <= 0 {
		lim.FlushEvery = 10 * time.Second
	}
	if len(from.Ranges) > 0 {
		return copyRanges(ctx, lim, deps, now, from)
	}
	start := now()
	at := from
	for !at.Done {
		if stopped(deps.Stop) {
			break
		}
		if lim.RunFor > 0 && at.Chunks > from.Chunks && now().Sub(start) >= lim.RunFor {
			break
		}
		next, err := copyGroup(ctx, lim, deps, now, at)
		if err != nil {
			return at, err
		}
		at = next
		deps.Heartbeat(ctx, at)
	}
	return at, nil
}

// copyGroup reads chunks after at until their records reach lim.ApplyBytes, lim.FlushEvery
// passes or the snapshot ends, applies them as one record and returns the cursor after them.
func copyGroup(ctx context.Context, lim CopyLimits, deps CopyDeps, now func() time.Time, at Cursor) (Cursor, error) {
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	begin := now()
	next := at
	var size int64
	for {
		limit := chunkLimit(lim, next.Limit)
		c, err := deps.Read(ctx, next.Last, limit)
		if err != nil {
			return at, err
		}
		next.Chunks++
		next.Rows += int64(c.Rows)
		next.Done = c.Rows < limit
		next.Limit = nextLimit(lim, c, limit)
		if c.Rows > 0 {
			recs = append(recs, c.Rec)
			next.Last = c.Last
			size += recordBytes(c.Rec)
		} else if c.Rec != nil {
			c.Rec.Release()
		}
		if !next.Done && deps.ReadAhead != nil {
			// The next chunk is read while this group is written (see Session).
			deps.ReadAhead(ctx, next.Last, next.Limit)
		}
		deps.Heartbeat(ctx, at) // keeps the attempt alive; the cursor moves only with a write
		if next.Done || size >= lim.ApplyBytes || now().Sub(begin) >= lim.FlushEvery || stopped(deps.Stop) {
			break
		}
	}
	if len(recs) > 0 {
		rec, err := concatChunks(recs, deps.Mem)
		if err != nil {
			return at, err
		}
		err = deps.Apply(ctx, rec)
		rec.Release()
		if err != nil {
			return at, err
		}
	}
	return next, nil
}

// chunkLimit is the row limit of a chunk: limit when a previous chunk sized it, else ChunkRows.
func chunkLimit(lim CopyLimits, limit int) int {
	if limit <= 0 || limit > lim.ChunkRows {
		return lim.ChunkRows
	}
	return limit
}

// nextLimit sizes the chunk after c (read with limit) by bytes: the rows lim.ChunkBytes holds at
// c's bytes per row, at least 1 and at most lim.ChunkRows; limit when ChunkBytes is unset or c
// is empty.
func nextLimit(lim CopyLimits, c Chunk, limit int) int {
	if lim.ChunkBytes <= 0 || c.Rows == 0 || c.Rec == nil {
		return limit
	}
	perRow := max(recordBytes(c.Rec)/int64(c.Rows), 1)
	return int(min(max(lim.ChunkBytes/perRow, 1), int64(lim.ChunkRows)))
}

// stopped reports whether stop is closed (never for nil).
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// concatChunks returns one record holding the chunks' rows in order (batch.ConcatRecords); the
// caller releases it and still owns recs.
func concatChunks(recs []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	rec, err := batch.ConcatRecords(mem, recs)
	if err != nil {
		return nil, buildError("", fmt.Errorf("joining %d chunks: %w", len(recs), err))
	}
	return rec, nil
}

// recordBytes is the size of rec's buffers (what a group of chunks holds in memory).
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}
