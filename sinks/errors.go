package sinks

import (
	"errors"
	"fmt"
)

// PoisonError marks a failure that retrying cannot fix: an unknown column, a failed cast, a value
// out of range, a constraint. The table stops; the operator fixes the cause and resumes.
type PoisonError struct {
	Err error
}

// Error returns the cause's message.
func (e *PoisonError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *PoisonError) Unwrap() error { return e.Err }

// Poison marks err as poison. Code that knows a failure is permanent marks it where it happens.
func Poison(err error) error {
	if err == nil {
		return nil
	}
	return &PoisonError{Err: err}
}

// Poisonf formats an error and marks it as poison.
func Poisonf(format string, args ...any) error {
	return Poison(fmt.Errorf(format, args...))
}

// IsPoison reports whether err (or an error it wraps) is poison. Everything else is transient.
func IsPoison(err error) bool {
	var p *PoisonError
	return errors.As(err, &p)
}
