package activities

import (
	"context"
	"slices"
	"sync"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
)

// heldSnapshot is an exported snapshot this worker holds for a table's session, and the chunk
// read ahead of the one being applied.
//
// A backfill alternates between reading a chunk from Postgres and writing it to the sink; both
// mostly wait on another process. So once CopyChunk has read chunk N it starts reading chunk
// N+1 (the rows after N's last key) and only then applies N: at most one chunk is read ahead,
// and nothing about the sink's writes changes (every chunk is still applied in key order, with
// the snapshot's position committed only by EndSnapshot). The next CopyChunk takes the chunk
// read ahead when it asks for exactly the rows after that key with the same size; any other
// request (a retry, another cursor) waits for the read ahead to end, drops it and reads afresh.
type heldSnapshot struct {
	table batch.TableName
	snap  *source.Snapshot

	mu   sync.Mutex
	next *readAhead // nil when no chunk is read ahead
}

// readAhead is one chunk read in the background.
type readAhead struct {
	after  []string // the cursor the chunk follows (key columns' text)
	limit  int
	cancel context.CancelFunc
	done   chan struct{} // closed when changes and err are set

	changes []batch.Change
	err     error
}

// readChunk returns up to limit rows after the key after (nil for the first chunk): the chunk
// read ahead when it matches, otherwise a fresh read under ctx.
func (h *heldSnapshot) readChunk(ctx context.Context, schema batch.Schema, after []string, limit int) ([]batch.Change, error) {
	h.mu.Lock()
	ra := h.next
	h.next = nil
	h.mu.Unlock()
	if ra != nil {
		// The snapshot's connection reads one query at a time: whatever ra is, wait for it.
		select {
		case <-ra.done:
		case <-ctx.Done():
			ra.cancel() // breaks the read; the run's next attempt fails on the snapshot and re-snapshots
			<-ra.done
			return nil, ctx.Err()
		}
		ra.cancel()
		if ra.limit == limit && slices.Equal(ra.after, after) {
			return ra.changes, ra.err
		}
	}
	return h.snap.ReadChunk(ctx, schema, cursor(schema, after), limit)
}

// readAheadFrom starts reading the chunk after the key after in the background. The read
// outlives the activity that starts it (the next CopyChunk takes it); stopReadAhead ends it.
func (h *heldSnapshot) readAheadFrom(ctx context.Context, schema batch.Schema, after []string, limit int) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ra := &readAhead{after: after, limit: limit, cancel: cancel, done: make(chan struct{})}
	h.mu.Lock()
	old := h.next
	h.next = ra
	h.mu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
	}
	go func() {
		defer close(ra.done)
		ra.changes, ra.err = h.snap.ReadChunk(rctx, schema, cursor(schema, after), limit)
	}()
}

// stopReadAhead cancels the chunk read ahead, if any, and waits for its goroutine to end. It is
// called before the snapshot is closed.
func (h *heldSnapshot) stopReadAhead() {
	h.mu.Lock()
	ra := h.next
	h.next = nil
	h.mu.Unlock()
	if ra != nil {
		ra.cancel()
		<-ra.done
	}
}

// cursor turns the key columns' text values of the last row copied into the row of values
// ReadChunk pages after (only the key columns are set); nil for the first chunk.
func cursor(schema batch.Schema, after []string) []batch.Value {
	if len(after) == 0 {
		return nil
	}
	row := make([]batch.Value, len(schema.Columns))
	for i, k := range keyIndexes(schema) {
		row[k] = batch.Value{Text: []byte(after[i])}
	}
	return row
}
