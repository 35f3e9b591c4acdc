package couchbase

import (
	"context"
	"fmt"
	"testing"

	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/sinks"
)

// TestClassify: failures retrying cannot fix are poison, the rest transient. A timeout is poison
// only when a collection of the target is missing (the client waits for it until it times out).
func TestClassify(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	gone := h.tgt
	gone.collection = "never_created"
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	cases := []struct {
		name   string
		ctx    context.Context
		tgt    target
		err    error
		poison bool
	}{
		{"value too large", t.Context(), h.tgt, gocb.ErrValueTooLarge, true},
		{"invalid argument", t.Context(), h.tgt, gocb.ErrInvalidArgument, true},
		{"durability impossible", t.Context(), h.tgt, gocb.ErrDurabilityImpossible, true},
		{"bucket not found", t.Context(), h.tgt, gocb.ErrBucketNotFound, true},
		{"collection not found", t.Context(), h.tgt, gocb.ErrCollectionNotFound, true},
		{"timeout, collections exist", t.Context(), h.tgt, gocb.ErrAmbiguousTimeout, false},
		{"timeout, collection missing", t.Context(), gone, gocb.ErrUnambiguousTimeout, true},
		{"timeout after cancellation", cancelled, gone, gocb.ErrAmbiguousTimeout, false},
		{"temporary failure", t.Context(), h.tgt, gocb.ErrTemporaryFailure, false},
		{"overload", t.Context(), h.tgt, gocb.ErrOverload, false},
		{"durability ambiguous", t.Context(), h.tgt, gocb.ErrDurabilityAmbiguous, false},
		{"cancelled", t.Context(), h.tgt, context.Canceled, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := h.sink.classify(tc.ctx, tc.tgt, fmt.Errorf("writing: %w", tc.err))
			if sinks.IsPoison(err) != tc.poison {
				t.Errorf("classify(%v) poison = %v, want %v", tc.err, sinks.IsPoison(err), tc.poison)
			}
			if tc.poison {
				t.Logf("error: %v", err)
			}
		})
	}
}
