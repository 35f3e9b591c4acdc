package couchbase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/couchbase/gocb/v2"
)

// maxChunkBytes bounds the keys of one key-index chunk document (well under the 20 MiB limit).
const maxChunkBytes = 1 << 20

// indexChunk is one key-index document: keys of documents batches created in the target.
type indexChunk struct {
	Keys []string `json:"keys"`
}

// writeIndex adds keys to the target's key index as new chunks, numbered from the first free
// number at or after first (chunks of attempts that did not commit are kept, so a key they
// indexed stays indexed), and returns the number after the last chunk it wrote (first when keys
// is empty). Chunks are inserted, never replaced, so the chunks of a target are always numbered
// without gaps.
func (s *Sink) writeIndex(ctx context.Context, t target, first int, keys []string) (int, error) {
	n := first
	for len(keys) > 0 {
		size, end := 0, 0
		for end < len(keys) && (end == 0 || size+len(keys[end])+3 <= maxChunkBytes) {
			size += len(keys[end]) + 3
			end++
		}
		body, err := json.Marshal(indexChunk{Keys: keys[:end]})
		if err != nil {
			return n, fmt.Errorf("encoding key index chunk %d of %s: %w", n, t, err)
		}
		_, err = s.meta(t).Insert(t.indexKey(n), json.RawMessage(body), &gocb.InsertOptions{
			DurabilityLevel: s.durability, Timeout: s.cfg.Timeout.D(), Context: ctx, Transcoder: gocb.NewRawJSONTranscoder(),
		})
		if errors.Is(err, gocb.ErrDocumentExists) {
			n++ // an attempt that did not commit wrote this one: keep it, take the next
			continue
		}
		if err != nil {
			return n, s.classify(ctx, t, fmt.Errorf("writing key index chunk %d of %s: %w", n, t, err))
		}
		keys = keys[end:]
		n++
	}
	return n, nil
}

// readIndex reads the target's key-index chunks from 0 up to the first missing one, and returns
// their keys and how many chunks there were.
func (s *Sink) readIndex(ctx context.Context, t target) (keys []string, chunks int, err error) {
	for n := 0; ; n++ {
		res, err := s.meta(t).Get(t.indexKey(n), &gocb.GetOptions{Context: ctx, Timeout: s.cfg.Timeout.D()})
		if errors.Is(err, gocb.ErrDocumentNotFound) {
			return keys, n, nil
		}
		if err != nil {
			return nil, 0, s.classify(ctx, t, fmt.Errorf("reading key index chunk %d of %s: %w", n, t, err))
		}
		var c indexChunk
		if err := res.Content(&c); err != nil {
			return nil, 0, fmt.Errorf("parsing key index chunk %d of %s: %w", n, t, err)
		}
		keys = append(keys, c.Keys...)
	}
}

// countIndex returns the number of key-index chunks (0 up to the first missing one).
func (s *Sink) countIndex(ctx context.Context, t target) (int, error) {
	for n := 0; ; n++ {
		res, err := s.meta(t).Exists(t.indexKey(n), &gocb.ExistsOptions{Context: ctx, Timeout: s.cfg.Timeout.D()})
		if err != nil {
			return 0, s.classify(ctx, t, fmt.Errorf("looking up key index chunk %d of %s: %w", n, t, err))
		}
		if !res.Exists() {
			return n, nil
		}
	}
}

// removeIndex removes chunks n-1 down to 0, last first, so an interrupted removal leaves chunks
// numbered without gaps.
func (s *Sink) removeIndex(ctx context.Context, t target, n int) error {
	for i := n - 1; i >= 0; i-- {
		_, err := s.meta(t).Remove(t.indexKey(i), &gocb.RemoveOptions{
			DurabilityLevel: s.durability, Timeout: s.cfg.Timeout.D(), Context: ctx,
		})
		if err != nil && !errors.Is(err, gocb.ErrDocumentNotFound) {
			return s.classify(ctx, t, fmt.Errorf("removing key index chunk %d of %s: %w", i, t, err))
		}
	}
	return nil
}
