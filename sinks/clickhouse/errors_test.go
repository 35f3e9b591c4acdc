package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
	chcolumn "github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"github.com/sluicecdc/sluice/sinks"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	ex := func(code int32) error { return &clickhouse.Exception{Code: code, Message: "x"} }
	for _, tc := range []struct {
		name   string
		err    error
		poison bool
	}{
		{"unknown column", ex(16), true},
		{"type mismatch", ex(53), true},
		{"value out of range", ex(321), true},
		{"unknown table", ex(60), true},
		{"driver conversion", &chcolumn.ColumnConverterError{Op: "Append", To: "Int64", From: "string"}, true},
		{"too many parts", ex(252), false},
		{"memory limit", ex(241), false},
		{"timeout", ex(159), false},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false},
		{"eof", io.EOF, false},
		{"deadline", context.DeadlineExceeded, false},
		{"wrapped poison code", fmt.Errorf("sending: %w", ex(16)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := classify(tc.err, "table %s: inserting", "shop.orders")
			if sinks.IsPoison(err) != tc.poison {
				t.Fatalf("classify(%v): poison %v, want %v", tc.err, sinks.IsPoison(err), tc.poison)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("classify lost the cause: %v", err)
			}
		})
	}
	if classify(nil, "x") != nil {
		t.Error("classify(nil) is not nil")
	}
}
