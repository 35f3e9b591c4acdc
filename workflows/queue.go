package workflows

import (
	"slices"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

// enqueue inserts ref into q, keeping q in commit order (staging.Compare: source, lo, hi) and
// holding each staged file once: a ref with the URI of a queued one (the reader re-staged the
// same range, or a listing found a file a signal also delivered) replaces it. Refs that overlap
// or are covered by others stay: CommitBatch trims or skips them against the sink's position and
// acknowledges their files, which must not linger in staging holding the slot back.
func enqueue(q []staging.BatchRef, ref staging.BatchRef) []staging.BatchRef {
	if i := slices.IndexFunc(q, func(r staging.BatchRef) bool { return r.URI == ref.URI }); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	i, _ := slices.BinarySearchFunc(q, ref, staging.Compare)
	return slices.Insert(q, i, ref)
}

// addRef takes a signalled batch of this table into the window when it sorts within it (or
// the window holds every known batch), keeping the window at most WindowRefs; otherwise it only
// counts it as staged beyond the window, for the next listing to find. A ref of another table
// is a sender's bug, logged and dropped (its file stays staged for its own table's next load).
func (t *table) addRef(ref staging.BatchRef) bool {
	if ref.Pipeline != t.in.Pipeline || ref.Table != t.in.Table() {
		return false
	}
	t.noteHi(ref.Hi)
	if t.beyond > 0 && (len(t.window) == 0 || staging.Compare(ref, t.window[len(t.window)-1]) > 0) {
		t.beyond++
		return true
	}
	t.window = enqueue(t.window, ref)
	t.trimWindow()
	return true
}

// mergeWindow joins a listed window (refs in commit order, more staged beyond them) with the
// refs signalled while the listing ran. When more are staged beyond, signalled refs after the
// last listed one may have unlisted batches before them: they are dropped from the window and
// counted beyond, for the next listing.
func (t *table) mergeWindow(refs []staging.BatchRef, more int, hi batch.SourcePosition) {
	for _, r := range refs {
		t.window = enqueue(t.window, r)
	}
	t.noteHi(hi)
	if more > 0 && len(refs) > 0 {
		last := refs[len(refs)-1]
		i, _ := slices.BinarySearchFunc(t.window, last, staging.Compare)
		i = min(i+1, len(t.window))
		t.window = t.window[:i:i]
	}
	t.beyond = more
	t.trimWindow()
	if more > 0 && len(t.window) == 0 {
		t.beyond = max(t.beyond, 1)
	}
}

// forgetWindow drops the window after a failed or interrupted listing: refs signalled meanwhile
// may have unlisted batches before them. They are all staged; the next listing finds them.
func (t *table) forgetWindow() {
	t.beyond += len(t.window) + 1
	t.window = nil
}

// trimWindow keeps the window at WindowRefs, counting the refs cut off as staged beyond it.
func (t *table) trimWindow() {
	if n := len(t.window) - WindowRefs; n > 0 {
		t.window = t.window[:WindowRefs:WindowRefs]
		t.beyond += n
	}
}

// noteHi records the highest hi known to be staged, for the lag.
func (t *table) noteHi(hi batch.SourcePosition) {
	if hi.Source == (batch.SourceID{}) {
		return
	}
	if t.stagedHi.Source != hi.Source || t.stagedHi.Position.Less(hi.Position) {
		t.stagedHi = hi
	}
}

// lagBytes is how far the staged work reaches past the committed position, in WAL bytes: the
// highest staged hi minus the committed LSN (0 when nothing staged is ahead).
func lagBytes(hi, committed batch.SourcePosition) uint64 {
	if hi.Source == committed.Source && hi.Position.LSN > committed.Position.LSN {
		return hi.Position.LSN - committed.Position.LSN
	}
	return 0
}

// oldestCommit returns the earliest source commit time of the queued batches' first changes,
// zero when none carries one: the age of the oldest change the table has not committed.
func oldestCommit(q []staging.BatchRef) time.Time {
	var oldest time.Time
	for _, r := range q {
		if !r.FirstCommit.IsZero() && (oldest.IsZero() || r.FirstCommit.Before(oldest)) {
			oldest = r.FirstCommit
		}
	}
	return oldest
}

// maxPosition returns the later of two positions of the same source, and b when a is zero or of
// another source (b comes from the sink, which is authoritative).
func maxPosition(a, b batch.SourcePosition) batch.SourcePosition {
	if c, err := a.Compare(b); err == nil && c > 0 {
		return a
	}
	return b
}
