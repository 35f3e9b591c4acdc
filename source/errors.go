package source

import (
	"errors"
	"fmt"
	"strings"
)

// errRedacted stands in for errors that could quote the DSN (and its password).
var errRedacted = errors.New("the connection string is not shown because it can hold a password")

// ErrPreflight is wrapped by the error Setup returns when the database does not meet the
// pipeline's needs; the error lists every problem found.
var ErrPreflight = errors.New("source preflight failed")

// ErrSlotInUse is returned when another process is reading the pipeline's slot.
var ErrSlotInUse = errors.New("replication slot is in use by another process")

// errSnapshotClosed is returned by reads of a closed snapshot.
var errSnapshotClosed = errors.New("the snapshot is closed")

// ErrStreamEnded is returned when the server ends the replication stream on its own.
var ErrStreamEnded = errors.New("replication stream ended by the server")

// Problem is one thing found wrong by the preflight checks: what (the setting, table or column),
// why, and how to fix it.
type Problem struct {
	Subject string `json:"subject"` // e.g. "wal_level", "table public.orders", "column public.orders.doc"
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// String formats the problem on one line.
func (p Problem) String() string {
	return fmt.Sprintf("%s: %s; fix: %s", p.Subject, p.Message, p.Fix)
}

// PreflightError lists every problem the checks found. It wraps ErrPreflight and is permanent.
type PreflightError struct {
	Problems []Problem
}

// Error lists the problems, one a line.
func (e *PreflightError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = "  - " + p.String()
	}
	return fmt.Sprintf("%s (%d problems):\n%s", ErrPreflight, len(e.Problems), strings.Join(lines, "\n"))
}

// Unwrap returns ErrPreflight.
func (e *PreflightError) Unwrap() error { return ErrPreflight }

// ErrSourceShuttingDown is returned when the reader closes its replication connection because
// the server is shutting down (SQLSTATE 57P03 on a new connection) while the reader holds back
// changes it was sent: the shutdown would otherwise wait for the reader. It is retryable: the
// reader reconnects when the server is back and reads the held changes again from the slot.
var ErrSourceShuttingDown = errors.New("the source server is shutting down: the reader closed its replication connection so as not to hold up the shutdown, and reconnects when the server is back")
