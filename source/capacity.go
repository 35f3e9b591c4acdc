package source

import (
	"context"
	"fmt"
)

// snapshotSlotPrefix starts the names of the temporary slots OpenSnapshot creates.
const snapshotSlotPrefix = "sluice_snap_"

// ReplicationCapacity is what a server's replication settings leave for backfills: each one
// holds a temporary replication slot and a walsender (its replication connection) while it
// copies, on top of the pipeline's own slot and the reader's walsender.
type ReplicationCapacity struct {
	MaxSlots   int // max_replication_slots
	MaxSenders int // max_wal_senders
	// Slots and Senders count the slots and walsenders in use, not counting Sluice's own
	// backfills (temporary slots named sluice_snap_*), whose places are the ones to share.
	Slots   int
	Senders int
	// PipelineSlot: the pipeline's slot exists. PipelineActive: a walsender streams from it.
	PipelineSlot   bool
	PipelineActive bool
}

// Backfills is how many backfills the server can hold at once: the free slots and walsenders,
// less the pipeline's own slot and reader while they do not exist yet; 0 when none is free.
func (c ReplicationCapacity) Backfills() int {
	slots := c.MaxSlots - c.Slots
	if !c.PipelineSlot {
		slots--
	}
	senders := c.MaxSenders - c.Senders
	if !c.PipelineActive {
		senders--
	}
	return max(0, min(slots, senders))
}

// DefaultParallelBackfills is the default of source.max_parallel_backfills: what the server has
// free less one walsender of headroom, and at least 1 (a backfill that finds no slot fails and
// retries visibly; `sluice check` names the cause). The headroom is for the walsenders that
// come and go around the backfills: a finished backfill's, or the setup's that created the
// slot, ends a moment after its connection closes, and the server refuses a new one meanwhile
// (500 tables on a server of 10 walsenders met it).
func (c ReplicationCapacity) DefaultParallelBackfills() int { return max(1, c.Backfills()-1) }

// BackfillProblems reports a configured source.max_parallel_backfills (0: derived) that the
// server cannot hold, and a server with no room for any backfill.
func (c ReplicationCapacity) BackfillProblems(configured int) []Problem {
	free := c.Backfills()
	subject := "setting source.max_parallel_backfills"
	fix := fmt.Sprintf("raise max_replication_slots (now %d, %d in use) and max_wal_senders (now %d, %d in use) on the server, or lower source.max_parallel_backfills",
		c.MaxSlots, c.Slots, c.MaxSenders, c.Senders)
	switch {
	case free == 0:
		return []Problem{{Subject: subject, Message: "the server has no replication slot or walsender free for a backfill (each backfill holds one of each while it copies)", Fix: fix}}
	case configured > free:
		return []Problem{{Subject: subject,
			Message: fmt.Sprintf("is %d, but the server has room for %d backfills at once (each holds a replication slot and a walsender); the others would fail and retry", configured, free),
			Fix:     fix}}
	}
	return nil
}

// ReadReplicationCapacity reads the replication settings and what uses them now. slot is the
// pipeline's slot.
func ReadReplicationCapacity(ctx context.Context, dsn, slot string) (ReplicationCapacity, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return ReplicationCapacity{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var c ReplicationCapacity
	err = conn.QueryRow(ctx, `
WITH ours AS (
  SELECT slot_name, active_pid FROM pg_catalog.pg_replication_slots
  WHERE temporary AND starts_with(slot_name::text, $2))
SELECT current_setting('max_replication_slots')::int, current_setting('max_wal_senders')::int,
  (SELECT count(*) FROM pg_catalog.pg_replication_slots WHERE slot_name NOT IN (SELECT slot_name FROM ours))::int,
  (SELECT count(*) FROM pg_catalog.pg_stat_replication
     WHERE pid NOT IN (SELECT active_pid FROM ours WHERE active_pid IS NOT NULL))::int,
  EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = $1),
  COALESCE((SELECT active FROM pg_catalog.pg_replication_slots WHERE slot_name = $1), false)`,
		slot, snapshotSlotPrefix).Scan(&c.MaxSlots, &c.MaxSenders, &c.Slots, &c.Senders, &c.PipelineSlot, &c.PipelineActive)
	if err != nil {
		return ReplicationCapacity{}, fmt.Errorf("reading the replication settings and slots in use: %w", err)
	}
	return c, nil
}
