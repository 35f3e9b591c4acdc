package failure

import (
	"errors"
	"fmt"
)

// Error marks a failure that retrying cannot fix. Type is its kind (one of the constants of
// types.go), or "" when the code that marks it cannot tell the kind: a sink's poison, a
// source's configuration problem. The caller that knows the context (the commit engine, an
// activity) marks it again with a type and a message saying what failed.
type Error struct {
	Type string
	Msg  string // the message; empty means the cause's
	Err  error  // the cause; may be nil when Msg is set
}

// Error returns Msg, or the cause's message when Msg is empty.
func (e *Error) Error() string {
	if e.Msg != "" || e.Err == nil {
		return e.Msg
	}
	return e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Permanent marks err as a failure retrying cannot fix, of no type yet; nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err}
}

// Permanentf formats an error and marks it permanent (Permanent).
func Permanentf(format string, args ...any) error {
	return Permanent(fmt.Errorf(format, args...))
}

// New is a permanent failure of type typ with message msg and cause (which may be nil).
func New(typ, msg string, cause error) error {
	return &Error{Type: typ, Msg: msg, Err: cause}
}

// Newf is a permanent failure of type typ with a formatted message and no cause.
func Newf(typ, format string, args ...any) error {
	return &Error{Type: typ, Msg: fmt.Sprintf(format, args...)}
}

// Is reports whether err (or an error it wraps) is marked permanent, of any type.
func Is(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// TypeOf returns the type of the outermost permanent mark that has one in err's chain, or ""
// when err holds no typed mark (it is transient, or permanent of no type yet).
func TypeOf(err error) string {
	if e := Typed(err); e != nil {
		return e.Type
	}
	return ""
}

// Typed returns the outermost permanent mark with a type in err's chain, or nil.
func Typed(err error) *Error {
	for err != nil {
		if e, ok := err.(*Error); ok && e.Type != "" {
			return e
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if e := Typed(inner); e != nil {
					return e
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}
