package batch

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Sentinel errors of the Arrow mapping. Errors carrying them are permanent: retrying the same
// rows gives the same error. The source and the activities recognize them with errors.Is (or the
// typed errors with errors.As) and stop the table instead of retrying or skipping.
var (
	// ErrNotRepresentable marks a valid Postgres value that its column's Arrow type cannot hold:
	// NaN or Infinity in a numeric(p,s) column, an 'infinity' date or timestamp, a
	// multi-dimensional value in a column declared one-dimensional (a ValueError).
	ErrNotRepresentable = errors.New("value not representable in arrow")
	// ErrMalformedValue marks text that is not what Postgres prints for the column's type: the
	// session settings of the source (DateStyle, IntervalStyle, bytea_output) differ from the
	// ones the mapping reads, or the column metadata is wrong (a ValueError).
	ErrMalformedValue = errors.New("malformed value")
	// ErrUnresolvedTOAST marks an unchanged TOASTed value still unresolved when a record is
	// built: the source must fetch such values before building (a ValueError).
	ErrUnresolvedTOAST = errors.New("unchanged toasted value not resolved")
)

// ValueError reports one value that cannot be converted to its column's Arrow type.
type ValueError struct {
	Table  TableName
	Column string
	Type   string // the Postgres type name (format_type)
	Value  string // the text form, shortened to at most 64 bytes
	Kind   error  // ErrNotRepresentable, ErrMalformedValue or ErrUnresolvedTOAST
	Reason string // what is wrong, e.g. "NaN does not fit decimal128(12,2)"
	Hint   string // what to do; may be empty
}

// Error names the table, column, type and value, the reason and what to do.
func (e *ValueError) Error() string {
	msg := fmt.Sprintf("table %s column %q (%s): value %q: %s", e.Table, e.Column, e.Type, e.Value, e.Reason)
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Unwrap returns the kind (ErrNotRepresentable, ErrMalformedValue or ErrUnresolvedTOAST).
func (e *ValueError) Unwrap() error { return e.Kind }

// convError is what the value parsers return; the record builder turns it into a ValueError
// naming the table and column.
type convError struct {
	kind   error
	reason string
	hint   string
}

func (e *convError) Error() string { return e.reason }

func malformed(format string, args ...any) error {
	return &convError{kind: ErrMalformedValue, reason: fmt.Sprintf(format, args...)}
}

func notRepresentable(hint, format string, args ...any) error {
	return &convError{kind: ErrNotRepresentable, reason: fmt.Sprintf(format, args...), hint: hint}
}

// valueError builds the ValueError for value v of column col.
func valueError(table TableName, col *Column, v []byte, err error) error {
	ve := &ValueError{Table: table, Column: col.Name, Type: col.TypeName, Value: shorten(v), Kind: ErrMalformedValue, Reason: err.Error()}
	var ce *convError
	if errors.As(err, &ce) {
		ve.Kind, ve.Reason, ve.Hint = ce.kind, ce.reason, ce.hint
	}
	return ve
}

// shorten returns v as a string of at most 64 bytes, cut at a rune boundary.
func shorten(v []byte) string {
	const max = 64
	if len(v) <= max {
		return string(v)
	}
	n := max
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return string(v[:n]) + fmt.Sprintf("...(%d bytes)", len(v))
}
