package failure

import (
	"errors"
	"fmt"
	"testing"
)

func TestMarks(t *testing.T) {
	t.Parallel()
	cause := errors.New("column note is integer")
	tests := []struct {
		name      string
		err       error
		permanent bool
		typ       string
		msg       string
	}{
		{name: "nil", err: nil},
		{name: "plain error is transient", err: cause, msg: cause.Error()},
		{name: "untyped mark", err: Permanent(cause), permanent: true, msg: cause.Error()},
		{name: "Permanent of nil is nil", err: Permanent(nil)},
		{name: "Permanentf", err: Permanentf("table %s: %w", "t", cause), permanent: true, msg: "table t: column note is integer"},
		{name: "typed mark", err: New(PoisonBatch, "poison batch", cause), permanent: true, typ: PoisonBatch, msg: "poison batch"},
		{name: "typed without cause", err: Newf(NotConfigured, "refused: %s", "x"), permanent: true, typ: NotConfigured, msg: "refused: x"},
		{name: "wrapped typed", err: fmt.Errorf("loading: %w", New(SourceMismatch, "other source", nil)), permanent: true, typ: SourceMismatch, msg: "loading: other source"},
		{name: "typed over untyped: outer type", err: New(MaintenanceFailed, "m", Permanent(cause)), permanent: true, typ: MaintenanceFailed, msg: "m"},
		{name: "untyped over typed: inner type", err: Permanent(New(SlotLost, "lost", nil)), permanent: true, typ: SlotLost, msg: "lost"},
		{name: "joined", err: errors.Join(cause, New(SourceSetup, "setup", nil)), permanent: true, typ: SourceSetup, msg: "column note is integer\nsetup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Is(tt.err); got != tt.permanent {
				t.Errorf("Is = %v, want %v", got, tt.permanent)
			}
			if got := TypeOf(tt.err); got != tt.typ {
				t.Errorf("TypeOf = %q, want %q", got, tt.typ)
			}
			if tt.err != nil && tt.err.Error() != tt.msg {
				t.Errorf("message %q, want %q", tt.err.Error(), tt.msg)
			}
			if tt.permanent && !errors.Is(tt.err, cause) && tt.typ != SourceMismatch && tt.typ != NotConfigured && tt.typ != SlotLost {
				t.Errorf("the cause is not in the chain of %v", tt.err)
			}
		})
	}
}
