package activities

import (
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/failure"
)

// TestReaderErrorClass checks the Temporal class the reader's errors get, wrapped or not: a
// table renamed under the reader or a batch that cannot be converted stops the run instead of
// being read again forever.
func TestReaderErrorClass(t *testing.T) {
	t.Parallel()
	setup := failure.New(failure.SourceSetup, "pipeline p: public.orders now streams as public.orders_v2", nil)
	poison := failure.New(failure.PoisonBatch, "batch cannot be converted", errors.New("bad value"))
	cases := []struct {
		name         string
		err          error
		nonRetryable bool
		errType      string
	}{
		{"setup", setup, true, failure.SourceSetup},
		{"poison", poison, true, failure.PoisonBatch},
		{"setup inside the stream's error", fmt.Errorf("streaming pipeline p: %w", setup), true, failure.SourceSetup},
		{"poison inside the stream's error", fmt.Errorf("streaming pipeline p: %w", fmt.Errorf("handling: %w", poison)), true, failure.PoisonBatch},
		{"transient stream failure", fmt.Errorf("streaming pipeline p: %w", errors.New("connection reset")), false, ""},
		{"plain error", errors.New("boom"), false, ""},
		{"permanent source failure", fmt.Errorf("streaming pipeline p: %w", failure.Permanentf("no table t")), true, failure.SourceSetup},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := toTemporal(readerError(c.err))
			app, ok := errors.AsType[*temporal.ApplicationError](got)
			if !c.nonRetryable {
				if ok && app.NonRetryable() {
					t.Fatalf("readerError(%v) is non-retryable, want retryable", c.err)
				}
				return
			}
			// Temporal reads only the returned error's own type: the mark must be on it.
			app, ok = got.(*temporal.ApplicationError)
			if !ok || !app.NonRetryable() || app.Type() != c.errType {
				t.Fatalf("readerError(%v) = %#v, want a non-retryable %s application error returned as it is", c.err, got, c.errType)
			}
		})
	}
}
