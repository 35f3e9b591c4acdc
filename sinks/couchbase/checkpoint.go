package couchbase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/batch"
)

// checkpointVersion is the version of the checkpoint document format this package writes.
const checkpointVersion = 1

// checkpoint is the document that holds a target's committed position and the state of its
// key index. It lives in the metadata collection under target.checkpointKey.
type checkpoint struct {
	Version int    `json:"version"`
	Table   string `json:"table"`  // the source table, schema.name
	Target  string `json:"target"` // scope.collection of the documents
	// Position is the Hi of the last batch whose documents were all written; nil when the target
	// holds no committed position (never written, or a discard is under way).
	Position *batch.SourcePosition `json:"position"`
	// PositionText is Position in its printed form, for people reading the document; never read.
	PositionText string `json:"position_text,omitempty"`
	Phase        string `json:"phase,omitempty"` // phase of the batch that committed Position
	// IndexChunks is the number of key-index chunks of committed batches (keys::<collection>::0..).
	// Chunks past it may exist, written by a batch that did not commit; they are read too, and
	// kept: new chunks are added after them.
	IndexChunks int `json:"index_chunks"`
	// Streaming is set by the first committed stream-phase batch: the snapshot is complete.
	Streaming bool `json:"streaming"`
	// Index names the target's key index when it holds the key of every document of the target,
	// in the stream phase too: a random id, set by the first batch this version writes into a
	// fresh target (or one still in its snapshot phase), and recorded in the fence of each
	// document whose key it lists. A target that began streaming under an earlier version, which
	// retired the index then, has none and cannot be discarded (indexComplete).
	Index string `json:"index,omitempty"`
	// Discarding is set while DiscardSnapshot removes the target's documents.
	Discarding bool      `json:"discarding,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// stored is a checkpoint as read, with what a compare-and-swap write needs.
type stored struct {
	checkpoint
	cas    gocb.Cas
	exists bool
}

// indexComplete reports whether the key index lists every document of the target: always
// before streaming began (every version indexed the snapshot phase), and after it when the
// target was indexed from its first batch.
func (c checkpoint) indexComplete() bool { return c.Index != "" || !c.Streaming }

// newIndexID returns a fresh key-index id.
func newIndexID() string { return "i" + strconv.FormatUint(rand.Uint64(), 16) }

// committed returns the committed position; ok is false when there is none.
func (c checkpoint) committed() (batch.SourcePosition, bool) {
	if c.Position == nil || c.Discarding {
		return batch.SourcePosition{}, false
	}
	return *c.Position, true
}

// readCheckpoint reads the target's checkpoint; a missing document is a fresh target.
func (s *Sink) readCheckpoint(ctx context.Context, t target) (stored, error) {
	res, err := s.meta(t).Get(t.checkpointKey(), &gocb.GetOptions{Context: ctx, Timeout: s.cfg.Timeout.D()})
	if errors.Is(err, gocb.ErrDocumentNotFound) {
		return stored{checkpoint: checkpoint{Version: checkpointVersion, Table: t.table, Target: t.String()}}, nil
	}
	if err != nil {
		return stored{}, s.classify(ctx, t, fmt.Errorf("reading the checkpoint of %s (%s.%s %s): %w",
			t, t.scope, t.meta, t.checkpointKey(), err))
	}
	var c checkpoint
	if err := res.Content(&c); err != nil {
		return stored{}, fmt.Errorf("parsing the checkpoint of %s (%s.%s %s): %w", t, t.scope, t.meta, t.checkpointKey(), err)
	}
	if c.Version != checkpointVersion {
		return stored{}, fmt.Errorf("the checkpoint of %s (%s.%s %s) has format version %d; this Sluice reads "+
			"version %d: run the Sluice version that wrote it", t, t.scope, t.meta, t.checkpointKey(), c.Version, checkpointVersion)
	}
	return stored{checkpoint: c, cas: res.Cas(), exists: true}, nil
}

// writeCheckpoint replaces the checkpoint read as prev with c, only if nobody changed it since
// (compare-and-swap on its CAS, or insert when it did not exist). A lost race is a transient
// error: the retry reads the winner's position.
func (s *Sink) writeCheckpoint(ctx context.Context, t target, prev stored, c checkpoint) (stored, error) {
	c.Version, c.Table, c.Target, c.UpdatedAt = checkpointVersion, t.table, t.String(), s.now().UTC()
	c.PositionText = ""
	if c.Position != nil {
		c.PositionText = c.Position.String()
	}
	body, err := json.Marshal(c)
	if err != nil {
		return stored{}, fmt.Errorf("encoding the checkpoint of %s: %w", t, err)
	}
	var res *gocb.MutationResult
	if prev.exists {
		res, err = s.meta(t).Replace(t.checkpointKey(), json.RawMessage(body), &gocb.ReplaceOptions{
			Cas: prev.cas, DurabilityLevel: s.durability, Timeout: s.cfg.Timeout.D(), Context: ctx,
			Transcoder: gocb.NewRawJSONTranscoder(),
		})
	} else {
		res, err = s.meta(t).Insert(t.checkpointKey(), json.RawMessage(body), &gocb.InsertOptions{
			DurabilityLevel: s.durability, Timeout: s.cfg.Timeout.D(), Context: ctx, Transcoder: gocb.NewRawJSONTranscoder(),
		})
	}
	if errors.Is(err, gocb.ErrCasMismatch) || errors.Is(err, gocb.ErrDocumentExists) || errors.Is(err, gocb.ErrDocumentNotFound) {
		return stored{}, fmt.Errorf("writing the checkpoint of %s: another writer changed it concurrently "+
			"(two workers committing one table?); retrying reads its position: %w", t, err)
	}
	if err != nil {
		return stored{}, s.classify(ctx, t, fmt.Errorf("writing the checkpoint of %s: %w", t, err))
	}
	return stored{checkpoint: c, cas: res.Cas(), exists: true}, nil
}

// removeCheckpoint deletes the checkpoint read as prev (compare-and-swap); missing is success.
func (s *Sink) removeCheckpoint(ctx context.Context, t target, prev stored) error {
	if !prev.exists {
		return nil
	}
	_, err := s.meta(t).Remove(t.checkpointKey(), &gocb.RemoveOptions{
		Cas: prev.cas, DurabilityLevel: s.durability, Timeout: s.cfg.Timeout.D(), Context: ctx,
	})
	switch {
	case err == nil, errors.Is(err, gocb.ErrDocumentNotFound):
		return nil
	case errors.Is(err, gocb.ErrCasMismatch):
		return fmt.Errorf("removing the checkpoint of %s: another writer changed it concurrently: %w", t, err)
	}
	return s.classify(ctx, t, fmt.Errorf("removing the checkpoint of %s: %w", t, err))
}
