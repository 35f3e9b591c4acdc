package source

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// LSN is a WAL position that prints (and marshals to JSON) as Postgres does: 0/16B3748.
type LSN uint64

// String prints the LSN as Postgres does.
func (l LSN) String() string { return formatLSN(uint64(l)) }

// MarshalText encodes the LSN as Postgres prints it.
func (l LSN) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses an LSN printed as Postgres does.
func (l *LSN) UnmarshalText(b []byte) error {
	v, err := parseLSN(string(b))
	if err != nil {
		return err
	}
	*l = LSN(v)
	return nil
}

// The values of pg_replication_slots.wal_status.
const (
	// WALReserved: the WAL the slot needs is within max_wal_size.
	WALReserved = "reserved"
	// WALExtended: the slot retains more than max_wal_size, within max_slot_wal_keep_size.
	WALExtended = "extended"
	// WALUnreserved: the slot retains more than max_slot_wal_keep_size; the next checkpoint
	// removes WAL it needs unless it catches up first.
	WALUnreserved = "unreserved"
	// WALLost: the WAL the slot needs was removed; the slot can never be read again.
	WALLost = "lost"
)

// SlotState is what the server says about a pipeline's slot and the WAL it retains: what
// `sluice status` and `sluice check` show. It is read in one query and changes nothing.
type SlotState struct {
	Slot   string `json:"slot"`
	Exists bool   `json:"exists"`
	// Active: a walsender (the pipeline's reader) streams from the slot; ActivePID is its
	// process id.
	Active    bool  `json:"active"`
	ActivePID int32 `json:"active_pid,omitempty"`
	// ConfirmedFlush is confirmed_flush_lsn: the stream resumes with transactions committing
	// after it. Restart is restart_lsn: the oldest WAL the slot makes the server keep.
	ConfirmedFlush LSN `json:"confirmed_flush_lsn"`
	Restart        LSN `json:"restart_lsn"`
	// Current is the server's pg_current_wal_lsn().
	Current LSN `json:"current_lsn"`
	// RetainedBytes is Current - Restart: the WAL kept on the server's disk for the slot.
	RetainedBytes int64 `json:"retained_bytes"`
	// WALStatus is reserved, extended, unreserved or lost (WALReserved, ...).
	WALStatus string `json:"wal_status,omitempty"`
	// SafeWALSize is how many more bytes of WAL can be written before the slot is in danger of
	// being lost; nil when max_slot_wal_keep_size is unlimited (-1).
	SafeWALSize *int64 `json:"safe_wal_size,omitempty"`
	// MaxSlotWALKeepSize is the server's setting as Postgres shows it ("-1" is unlimited).
	MaxSlotWALKeepSize string `json:"max_slot_wal_keep_size"`
	// KeepUnlimited: max_slot_wal_keep_size is -1, so the slot can retain WAL until the disk is
	// full, and is never invalidated.
	KeepUnlimited bool `json:"keep_unlimited"`
}

// Lost reports whether the slot cannot be read any more: invalidated (wal_status lost).
func (s SlotState) Lost() bool { return s.Exists && s.WALStatus == WALLost }

// ReadSlotState reads the state of the replication slot named slot on the source dsn, over a
// connection borrowed from pool (nil: one of its own; a worker reads it every few seconds). A
// slot that does not exist is reported with Exists false, not as an error.
func ReadSlotState(ctx context.Context, pool *Pool, dsn, slot string) (SlotState, error) {
	conn, err := pool.Acquire(ctx, dsn)
	if err != nil {
		return SlotState{}, err
	}
	defer conn.Release(ctx)
	return readSlotState(ctx, conn.Conn, slot)
}

func readSlotState(ctx context.Context, conn *pgx.Conn, slot string) (SlotState, error) {
	s := SlotState{Slot: slot}
	var (
		current, confirmed, restart *string
		pid                         *int32
		retained                    *int64
	)
	err := conn.QueryRow(ctx, `
SELECT pg_catalog.pg_current_wal_lsn()::text, current_setting('max_slot_wal_keep_size'),
       current_setting('max_slot_wal_keep_size') = '-1',
       s.slot_name IS NOT NULL, coalesce(s.active, false), s.active_pid,
       s.confirmed_flush_lsn::text, s.restart_lsn::text, coalesce(s.wal_status, ''), s.safe_wal_size,
       pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.restart_lsn)::bigint
FROM (SELECT 1) AS one LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1`, slot).
		Scan(&current, &s.MaxSlotWALKeepSize, &s.KeepUnlimited, &s.Exists, &s.Active, &pid,
			&confirmed, &restart, &s.WALStatus, &s.SafeWALSize, &retained)
	if err != nil {
		return s, fmt.Errorf("reading the state of replication slot %s: %w", slot, err)
	}
	if pid != nil {
		s.ActivePID = *pid
	}
	if retained != nil {
		s.RetainedBytes = *retained
	}
	for _, f := range []struct {
		text *string
		dst  *LSN
	}{{current, &s.Current}, {confirmed, &s.ConfirmedFlush}, {restart, &s.Restart}} {
		if f.text == nil {
			continue
		}
		if err := f.dst.UnmarshalText([]byte(*f.text)); err != nil {
			return s, fmt.Errorf("reading the state of replication slot %s: %w", slot, err)
		}
	}
	return s, nil
}
