package activities

import (
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/failure"
)

// TestToTemporal checks the one conversion of marked failures into Temporal errors: a typed mark
// anywhere in the chain is returned as a non-retryable ApplicationError of its type (Temporal
// reads only the returned error's own type), anything else as it is.
func TestToTemporal(t *testing.T) {
	t.Parallel()
	cause := errors.New("column note is integer")
	tests := []struct {
		name     string
		err      error
		wantType string // "" wants err returned as it is
		wantMsg  string
	}{
		{name: "nil", err: nil},
		{name: "transient", err: cause},
		{name: "permanent of no type yet", err: failure.Permanent(cause)},
		{name: "typed", err: failure.New(failure.PoisonBatch, "poison batch: table t", cause), wantType: failure.PoisonBatch, wantMsg: "poison batch: table t"},
		{name: "typed, wrapped", err: fmt.Errorf("loading table t: %w", failure.Newf(failure.SourceMismatch, "another source")),
			wantType: failure.SourceMismatch, wantMsg: "loading table t: another source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := toTemporal(tt.err)
			if tt.wantType == "" {
				if got != tt.err {
					t.Fatalf("toTemporal(%v) = %v, want it unchanged", tt.err, got)
				}
				return
			}
			app, ok := got.(*temporal.ApplicationError)
			if !ok || !app.NonRetryable() || app.Type() != tt.wantType || app.Message() != tt.wantMsg {
				t.Fatalf("toTemporal(%v) = %#v, want a non-retryable %s with message %q", tt.err, got, tt.wantType, tt.wantMsg)
			}
		})
	}
}
