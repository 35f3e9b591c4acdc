package sinks

import "github.com/sluicecdc/sluice/failure"

// Poison marks err as poison: a failure that retrying cannot fix (an unknown column, a failed
// cast, a value out of range, a constraint). The table stops; the operator fixes the cause and
// resumes. It is failure.Permanent under the name a sink's author looks for; code that knows a
// failure is permanent marks it where it happens. nil stays nil.
func Poison(err error) error { return failure.Permanent(err) }

// Poisonf formats an error and marks it as poison.
func Poisonf(format string, args ...any) error { return failure.Permanentf(format, args...) }

// IsPoison reports whether err (or an error it wraps) is poison (failure.Is). Everything else is
// transient.
func IsPoison(err error) bool { return failure.Is(err) }
