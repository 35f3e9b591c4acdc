package backfill

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/source"
)

// Session is an exported snapshot a worker holds for a table's backfill, and the chunk read
// ahead of the one being applied. It is safe for concurrent use.
//
// A backfill alternates between reading a chunk from Postgres and writing it to the sink; both
// mostly wait on another process. So once the backfill has read chunk N it starts reading chunk
// N+1 (the rows after N's last key, straight into its Arrow record) and only then applies N: at most one chunk is read ahead,
// and nothing about the sink's writes changes (every chunk is still applied in key order, with
// the snapshot's position committed only by EndSnapshot). The next ReadChunk takes the chunk
// read ahead when it asks for exactly the rows after that key with the same size; any other
// request (a retry, another cursor) waits for the read ahead to end, drops it and reads afresh.
type Session struct {
	table batch.TableName
	snap  *source.Snapshot

	mu   sync.Mutex
	next *readAhead // nil when no chunk is read ahead
	// textPerRow is each column's text bytes per row in the last chunk read, so the next
	// chunk's builders are sized once instead of regrowing (reads are one at a time).
	textPerRow []float64
}

// readAhead is one chunk read in the background.
type readAhead struct {
	after  []string // the cursor the chunk follows (key columns' text)
	limit  int
	cancel context.CancelFunc
	done   chan struct{} // closed when changes and err are set

	chunk Chunk
	err   error
}

// Chunk is one chunk of a snapshot as an Arrow record.
type Chunk struct {
	Rec  arrow.RecordBatch // the rows (the caller releases it)
	Rows int
	Last []string // key columns' text of the last row; nil when there are no rows
}

// buildError marks a failure to build the record of table's snapshot rows (a row the record
// cannot hold) as a PoisonBatch, as opposed to a failed read: reading again meets the same rows.
func buildError(table string, err error) error {
	msg := "snapshot rows cannot be converted: " + err.Error()
	if table != "" {
		msg = "table " + table + ": " + msg
	}
	return failure.New(failure.PoisonBatch, msg, err)
}

// NewSession returns the session of table's backfill under snap, which it closes never: the
// caller closes snap after StopReadAhead.
func NewSession(table batch.TableName, snap *source.Snapshot) *Session {
	return &Session{table: table, snap: snap}
}

// Table returns the table the session backfills.
func (h *Session) Table() batch.TableName { return h.table }

// Snapshot returns the session's exported snapshot.
func (h *Session) Snapshot() *source.Snapshot { return h.snap }

// readRecord reads up to limit rows after the key after straight into an Arrow record: rows
// never exist as Changes, their values go from the connection's buffer into the builders.
func (h *Session) readRecord(ctx context.Context, mem memory.Allocator, schema batch.Schema, rng source.KeyRange, after []string, limit int) (Chunk, error) {
	b, err := batch.NewRecordBuilder(mem, schema)
	if err != nil {
		return Chunk{}, buildError(h.table.String(), err)
	}
	defer b.Release()
	b.Reserve(limit)
	h.mu.Lock()
	for j, per := range h.textPerRow {
		b.ReserveData(j, int(per*float64(limit)*1.05))
	}
	h.mu.Unlock()
	text := make([]int, len(schema.Columns))
	ingest := time.Now()
	n := 0
	// Integers, dates and timestamps outside the key come in binary: Postgres does not format
	// them and the builder does not parse them.
	formats := b.BinaryFormats()
	last, err := h.snap.CopyChunk(ctx, schema, cursor(schema, after), rng, limit, formats, func(c *batch.Change, raw [][]byte) error {
		if err := b.AppendRow(c, raw, formats, ingest); err != nil {
			return buildError(h.table.String(), err)
		}
		for j, v := range raw {
			text[j] += len(v)
		}
		n++
		return nil
	})
	if err != nil {
		return Chunk{}, err
	}
	if n > 0 {
		per := make([]float64, len(text))
		for j, t := range text {
			per[j] = float64(t) / float64(n)
		}
		h.mu.Lock()
		h.textPerRow = per
		h.mu.Unlock()
	}
	out := Chunk{Rec: b.NewRecord(), Rows: n}
	if last != nil {
		for _, k := range schema.KeyIndexes() {
			out.Last = append(out.Last, string(last[k].Text))
		}
	}
	return out, nil
}

// ReadChunk returns up to limit rows after the key after (nil for the first chunk): the chunk
// read ahead when it matches, otherwise a fresh read under ctx.
func (h *Session) ReadChunk(ctx context.Context, mem memory.Allocator, schema batch.Schema, after []string, limit int) (Chunk, error) {
	if ra := h.swapReadAhead(nil); ra != nil {
		// The snapshot's connection reads one query at a time: whatever ra is, wait for it.
		select {
		case <-ra.done:
		case <-ctx.Done():
			ra.abandon() // breaks the read; the run's next attempt fails on the snapshot and re-snapshots
			return Chunk{}, ctx.Err()
		}
		ra.cancel()
		if ra.limit == limit && slices.Equal(ra.after, after) {
			return ra.chunk, ra.err
		}
		ra.release()
	}
	return h.readRecord(ctx, mem, schema, source.KeyRange{}, after, limit)
}

// ReadRange returns up to limit rows of the key range r after the key after (nil: from the
// range's start). Several run at once, each on one of the snapshot's reading connections (see
// SplitRanges); it never takes the chunk read ahead.
func (h *Session) ReadRange(ctx context.Context, mem memory.Allocator, schema batch.Schema, r source.KeyRange, after []string, limit int) (Chunk, error) {
	return h.readRecord(ctx, mem, schema, r, after, limit)
}

// rangesPerReader is how many key ranges a parallel copy has per reader: ranges of equal key
// width hold unequal rows when the keys are sparse in places, and a reader done with its range
// takes the next one.
const rangesPerReader = 4

// SplitRanges opens parallel reading connections of the snapshot and returns the key ranges of
// a parallel copy of the table (source.SplitKeyRanges). It returns nil, and opens nothing, when
// parallel < 2 or the table does not split (its first key column is not an integer, or it is
// empty): the copy then reads one range with Read.
func (h *Session) SplitRanges(ctx context.Context, schema batch.Schema, parallel int) ([]RangeCursor, error) {
	if parallel < 2 {
		return nil, nil
	}
	krs, err := h.snap.SplitKeyRanges(ctx, schema, parallel*rangesPerReader)
	if err != nil || len(krs) < 2 {
		return nil, err
	}
	if err := h.OpenConns(ctx, parallel); err != nil {
		return nil, err
	}
	out := make([]RangeCursor, len(krs))
	for i, kr := range krs {
		out[i] = RangeCursor{KeyRange: kr}
	}
	return out, nil
}

// OpenConns opens reading connections of the snapshot until it has parallel (see
// source.Snapshot.OpenConns); a copy with ranges calls it on every call, since a slice may
// run on a session whose earlier slice opened them or not.
func (h *Session) OpenConns(ctx context.Context, parallel int) error {
	return h.snap.OpenConns(ctx, parallel)
}

// swapReadAhead makes ra the chunk read ahead (nil: none) and returns the one it replaces.
func (h *Session) swapReadAhead(ra *readAhead) *readAhead {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.next
	h.next = ra
	return old
}

// abandon cancels the read ahead, waits for its goroutine to end and frees its record.
func (ra *readAhead) abandon() {
	ra.cancel()
	<-ra.done
	ra.release()
}

// release frees the record of a chunk read ahead that nobody takes.
func (ra *readAhead) release() {
	if ra.chunk.Rec != nil {
		ra.chunk.Rec.Release()
		ra.chunk.Rec = nil
	}
}

// ReadAheadFrom starts reading the chunk after the key after in the background. The read
// outlives the ctx that starts it (the next ReadChunk takes it); StopReadAhead ends it.
func (h *Session) ReadAheadFrom(ctx context.Context, mem memory.Allocator, schema batch.Schema, after []string, limit int) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ra := &readAhead{after: after, limit: limit, cancel: cancel, done: make(chan struct{})}
	if old := h.swapReadAhead(ra); old != nil {
		old.abandon()
	}
	go func() {
		defer close(ra.done)
		ra.chunk, ra.err = h.readRecord(rctx, mem, schema, source.KeyRange{}, after, limit)
	}()
}

// StopReadAhead cancels the chunk read ahead, if any, and waits for its goroutine to end. It is
// called before the snapshot is closed.
func (h *Session) StopReadAhead() {
	if ra := h.swapReadAhead(nil); ra != nil {
		ra.abandon()
	}
}

// cursor turns the key columns' text values of the last row copied into the row of values
// ReadChunk pages after (only the key columns are set); nil for the first chunk.
func cursor(schema batch.Schema, after []string) []batch.Value {
	if len(after) == 0 {
		return nil
	}
	row := make([]batch.Value, len(schema.Columns))
	for i, k := range schema.KeyIndexes() {
		row[k] = batch.Value{Text: []byte(after[i])}
	}
	return row
}
