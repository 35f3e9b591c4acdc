package activities

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/source"
)

// toTemporal turns the error an activity returns into what Temporal sees, the one place the
// activities build Temporal errors: a failure marked permanent with a type (package failure)
// anywhere in err's chain becomes a non-retryable ApplicationError of that type, with err's
// message and the mark's cause; anything else (nil, a transient error, a permanent mark of no
// type yet) is returned as it is, for Temporal to retry. Temporal honours a non-retryable mark
// only on the error an activity returns, never on one it wraps, so the conversion is made on
// the way out of every activity (convert).
func toTemporal(err error) error {
	e := failure.Typed(err)
	if e == nil {
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), e.Type, e.Err)
}

// convert applies toTemporal to an activity's named error result; every activity defers it.
func convert(err *error) { *err = toTemporal(*err) }

// sourceError gives an error of the source its class: a lost slot is SlotLost; another failure
// marked permanent (a failed preflight, a missing table) or already typed keeps or gets its type
// (SourceSetup when the source marked it without one); other errors stay transient. what says
// what failed, as the message's start.
func sourceError(what string, err error) error {
	if err == nil {
		return nil
	}
	if failure.TypeOf(err) != "" {
		return fmt.Errorf("%s: %w", what, err)
	}
	if lost, ok := errors.AsType[*source.SlotLostError](err); ok {
		return failure.New(failure.SlotLost, fmt.Sprintf("%s: %v", what, lost), err)
	}
	if failure.Is(err) {
		return failure.New(failure.SourceSetup, fmt.Sprintf("%s: %v", what, err), err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
