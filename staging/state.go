package staging

import (
	"context"
	"fmt"

	"gocloud.dev/blob"
)

// A pipeline keeps a few small state documents beside its batches, under
//
//	<pipeline>/_state/<name>.json
//
// (a table's prefix always holds a '.', "_state" none, so the two never meet; listings of
// batches skip them: they do not end in .arrow). They live here because every worker that
// reads or backfills the pipeline reaches the staging store.

// State is the pipeline's small state documents as a *Store keeps them (PutState, GetState):
// the reader's schema records and the partition records are written through it. GetState
// returns an error wrapping ErrNotFound for a document never written.
type State interface {
	GetState(ctx context.Context, pipeline, name string) ([]byte, error)
	PutState(ctx context.Context, pipeline, name string, data []byte) error
}

// stateName is the object name of a pipeline's state document name.
func stateName(pipeline, name string) string {
	return pipelinePrefix(pipeline) + "_state/" + escapeName(name) + ".json"
}

// PutState writes the pipeline's state document name, replacing it whole (the object appears
// whole or not at all).
func (s *Store) PutState(ctx context.Context, pipeline, name string, data []byte) error {
	key := stateName(pipeline, name)
	if err := s.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "application/json", BeforeWrite: privateFile}); err != nil {
		return fmt.Errorf("writing state %s of pipeline %s to staging: %w", name, pipeline, err)
	}
	return nil
}

// GetState reads the pipeline's state document name; an error wrapping ErrNotFound means it was
// never written.
func (s *Store) GetState(ctx context.Context, pipeline, name string) ([]byte, error) {
	data, err := s.readSmall(ctx, stateName(pipeline, name))
	if err != nil {
		return nil, fmt.Errorf("reading state %s of pipeline %s from staging: %w", name, pipeline, s.classify(err))
	}
	return data, nil
}
