package workflows

import (
	"slices"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

// enqueue inserts ref into q, keeping q in commit order (staging.Compare: source, lo, hi) and
// holding each staged file once: a ref with the URI of a queued one (the reader re-staged the
// same range, or LoadTable found a file a signal also delivered) replaces it. Refs that overlap
// or are covered by others stay: CommitBatch trims or skips them against the sink's position and
// acknowledges their files, which must not linger in staging holding the slot back.
func enqueue(q []staging.BatchRef, ref staging.BatchRef) []staging.BatchRef {
	if i := slices.IndexFunc(q, func(r staging.BatchRef) bool { return r.URI == ref.URI }); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	i, _ := slices.BinarySearchFunc(q, ref, staging.Compare)
	return slices.Insert(q, i, ref)
}

// lagBytes is how far the queued work reaches past the committed position, in WAL bytes: the
// highest queued hi minus the committed LSN (0 when nothing queued is ahead).
func lagBytes(q []staging.BatchRef, committed batch.SourcePosition) uint64 {
	var lag uint64
	for _, r := range q {
		if r.Hi.Source == committed.Source && r.Hi.Position.LSN > committed.Position.LSN {
			lag = max(lag, r.Hi.Position.LSN-committed.Position.LSN)
		}
	}
	return lag
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
