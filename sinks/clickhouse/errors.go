package clickhouse

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2"
	chcolumn "github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"github.com/sluicecdc/sluice/sinks"
)

// poisonCodes are the server's exception codes that retrying the same statement cannot fix:
// the batch does not fit the table (unknown column, type mismatch, value out of range) or the
// table is gone. Everything else (connection refused, timeouts, too many parts, memory limits,
// a server shutting down) is transient.
var poisonCodes = map[int32]string{
	6:   "CANNOT_PARSE_TEXT",
	10:  "NOT_FOUND_COLUMN_IN_BLOCK",
	15:  "DUPLICATE_COLUMN",
	16:  "NO_SUCH_COLUMN_IN_TABLE",
	20:  "NUMBER_OF_COLUMNS_DOESNT_MATCH",
	27:  "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
	36:  "BAD_ARGUMENTS",
	38:  "CANNOT_PARSE_DATE",
	41:  "CANNOT_PARSE_DATETIME",
	43:  "ILLEGAL_TYPE_OF_ARGUMENT",
	44:  "ILLEGAL_COLUMN",
	47:  "UNKNOWN_IDENTIFIER",
	50:  "UNKNOWN_TYPE",
	53:  "TYPE_MISMATCH",
	60:  "UNKNOWN_TABLE",
	62:  "SYNTAX_ERROR",
	69:  "ARGUMENT_OUT_OF_BOUND",
	70:  "CANNOT_CONVERT_TYPE",
	72:  "CANNOT_PARSE_NUMBER",
	81:  "UNKNOWN_DATABASE",
	117: "INCORRECT_DATA",
	321: "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
	407: "DECIMAL_OVERFLOW",
}

// Exception codes the sink handles itself.
const (
	codeUnknownTable    = 60
	codeUnknownDatabase = 81
	codeColumnExists    = 44 // ILLEGAL_COLUMN: also "column with this name already exists"
)

// exceptionCode returns the server exception code in err, or 0.
func exceptionCode(err error) int32 {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return ex.Code
	}
	return 0
}

// classify wraps err with context and marks it poison when retrying cannot fix it: a poison
// server exception or a value the driver cannot convert. Cancellation, network failures and
// every other server exception stay transient.
func classify(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	wrapped := fmt.Errorf(format+": %w", append(args, err)...)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return wrapped
	}
	if _, ok := poisonCodes[exceptionCode(err)]; ok {
		return sinks.Poison(wrapped)
	}
	var (
		conv        *chcolumn.ColumnConverterError
		colErr      *chcolumn.Error
		unsupported *chcolumn.UnsupportedColumnTypeError
	)
	if errors.As(err, &conv) || errors.As(err, &colErr) || errors.As(err, &unsupported) {
		return sinks.Poison(wrapped)
	}
	return wrapped
}

// isNoRows reports whether err says a QueryRow found no row.
func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
