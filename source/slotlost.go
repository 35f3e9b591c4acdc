package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
)

// SlotLostError says the pipeline's slot can no longer deliver the changes the tables need: it
// was dropped, or invalidated (its WAL removed past max_slot_wal_keep_size). Retrying cannot
// fix it; every table may have missed changes and must be backfilled again. Setup and
// Stream.Run return it marked permanent (failure.Permanent).
type SlotLostError struct {
	Slot string
	// What happened: "was dropped", "was invalidated ...".
	What string
}

// Error names the slot, what happened and the remedy.
func (e *SlotLostError) Error() string {
	return fmt.Sprintf("replication slot %s %s: the changes it held for the tables cannot be read any more, so every table may have missed changes "+
		"(Sluice never recreates a lost slot by itself, which would skip them silently). Remedy: `sluice teardown --config <file> --yes` "+
		"(stops the pipeline, drops the slot and the publication; the sinks keep their data), `sluice start --config <file>`, then "+
		"`sluice resync --config <file> --table <schema.table>` for every table, which backfills it again from a new snapshot",
		e.Slot, e.What)
}

// slotLost is the permanent error of a lost slot.
func slotLost(slot, what string) error {
	return failure.Permanent(&SlotLostError{Slot: slot, What: what})
}

// invalidated is what a slot whose wal_status is lost went through.
const invalidated = "was invalidated (wal_status lost): the server removed WAL it still needed because it retained more than max_slot_wal_keep_size"

// The slot's record: a comment on the pipeline's publication, written when Setup creates the
// slot, naming the slot and the LSN it was created at (its consistent point). Postgres keeps no
// creation mark of its own for a slot, and the record lets Setup tell a slot that was dropped
// (record, no slot: SlotLost) from a new pipeline (neither), and lets every table check that
// its committed position is one this slot can continue from (no older than the slot). It also
// names the pipeline (records written before it did not), so that a setup of another pipeline
// that names the same slot is refused (ownerProblems). It lives and dies with the publication:
// `sluice teardown` drops both.
var slotRecordRE = regexp.MustCompile(`^sluice: replication slot ([a-z0-9_]+) created at ([0-9A-Fa-f]+/[0-9A-Fa-f]+|unknown)(?: for pipeline "((?:[^"\\]|\\.)*)")?`)

// slotRecord is a parsed record; LSN 0 means the slot was found existing (a pipeline set up
// before records were kept) and its creation point is unknown.
type slotRecord struct {
	Found bool
	Slot  string
	LSN   uint64
	// Pipeline is the pipeline the record names; empty in records written before they named it.
	Pipeline string
	// Joined holds the tables that joined the publication after it was created, with the
	// position each joined at (see joinedRE).
	Joined map[string]uint64
}

// parseSlotRecord parses a publication's comment; Found is false when it holds no record.
func parseSlotRecord(comment string) (slotRecord, error) {
	m := slotRecordRE.FindStringSubmatch(comment)
	if m == nil {
		return slotRecord{}, nil
	}
	rec := slotRecord{Found: true, Slot: m[1]}
	if m[3] != "" {
		p, err := strconv.Unquote(`"` + m[3] + `"`)
		if err != nil {
			return slotRecord{}, fmt.Errorf("the pipeline name in slot record %q: %w", comment, err)
		}
		rec.Pipeline = p
	}
	if m[2] != "unknown" {
		lsn, err := parseLSN(m[2])
		if err != nil {
			return slotRecord{}, err
		}
		rec.LSN = lsn
	}
	return rec, nil
}

// readSlotRecord reads the record from the publication's comment; none when the publication
// does not exist or has no record.
func readSlotRecord(ctx context.Context, q querier, publication string) (slotRecord, error) {
	comment, err := readComment(ctx, q, publication)
	if err != nil || comment == "" {
		return slotRecord{}, err
	}
	rec, err := parseSlotRecord(comment)
	if err != nil {
		return slotRecord{}, fmt.Errorf("reading the slot record of publication %s: %w", publication, err)
	}
	rec.Joined = parseJoined(comment)
	return rec, nil
}

// readComment returns the publication's comment ("" when it has none or does not exist).
func readComment(ctx context.Context, q querier, publication string) (string, error) {
	var comment *string
	err := q.QueryRow(ctx, `SELECT pg_catalog.obj_description(oid, 'pg_publication') FROM pg_catalog.pg_publication WHERE pubname = $1`, publication).Scan(&comment)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && comment == nil {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the slot record of publication %s: %w", publication, err)
	}
	return *comment, nil
}

// A table that joins an existing publication (a table added to the config of a running pipeline,
// or one added back after `sluice remove`) has a line of its own in the record: the WAL position
// before the ALTER PUBLICATION that added it, written in the same transaction. The slot delivers
// the table's changes only from there on, so a committed position older than it (a table added
// back: it resumes from before its removal) would skip the changes in between: the table stops
// with PositionGap instead (Info.Joined, activities' gap check).
var joinedRE = regexp.MustCompile(`(?m)^sluice: table ("(?:[^"\\]|\\.)*") joined at ([0-9A-Fa-f]+/[0-9A-Fa-f]+)$`)

// parseJoined returns the joined lines of a publication's comment: table ("schema.name") → the
// position it joined at.
func parseJoined(comment string) map[string]uint64 {
	var out map[string]uint64
	for _, m := range joinedRE.FindAllStringSubmatch(comment, -1) {
		name, err := strconv.Unquote(m[1])
		if err != nil {
			continue
		}
		lsn, err := parseLSN(m[2])
		if err != nil {
			continue
		}
		if out == nil {
			out = map[string]uint64{}
		}
		out[name] = lsn
	}
	return out
}

// joinedText is the joined lines of a record, one per table in name order, each after a newline.
func joinedText(joined map[string]uint64) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(joined)) {
		fmt.Fprintf(&b, "\nsluice: table %s joined at %s", strconv.Quote(name), formatLSN(joined[name]))
	}
	return b.String()
}

// recordJoined adds to the publication's comment that tables joined it at lsn, in tx (the
// transaction that adds them), keeping the rest of the record.
func recordJoined(ctx context.Context, tx pgx.Tx, publication string, tables []string, lsn uint64) error {
	old, err := readComment(ctx, tx, publication)
	if err != nil {
		return err
	}
	joined := parseJoined(old)
	if joined == nil {
		joined = map[string]uint64{}
	}
	for _, t := range tables {
		joined[t] = lsn
	}
	first, _, _ := strings.Cut(old, "\n")
	if parseJoined(first) != nil {
		first = "" // a comment of joined lines only (no slot recorded yet)
	}
	text := strings.TrimPrefix(first+joinedText(joined), "\n")
	if _, err := tx.Exec(ctx, fmt.Sprintf("COMMENT ON PUBLICATION %s IS %s", quoteIdent(publication), quoteLiteral(text))); err != nil {
		return fmt.Errorf("recording on publication %s that tables joined it (the role must own the publication): %w", publication, err)
	}
	return nil
}

// slotRecordText is the comment that records that pipeline's slot was created at lsn (0: unknown).
func slotRecordText(pipeline, slot string, lsn uint64) string {
	at := "unknown"
	if lsn != 0 {
		at = formatLSN(lsn)
	}
	owner := ""
	if pipeline != "" {
		owner = " for pipeline " + strconv.Quote(pipeline)
	}
	return fmt.Sprintf("sluice: replication slot %s created at %s%s; do not edit (sluice teardown drops the slot and this publication)", slot, at, owner)
}

// writeSlotRecord records on the publication that pipeline's slot was created at lsn (0: unknown),
// keeping the record's joined lines.
func writeSlotRecord(ctx context.Context, conn *pgx.Conn, pipeline, publication, slot string, lsn uint64) error {
	old, err := readComment(ctx, conn, publication)
	if err != nil {
		return err
	}
	text := slotRecordText(pipeline, slot, lsn) + joinedText(parseJoined(old))
	if _, err := conn.Exec(ctx, fmt.Sprintf("COMMENT ON PUBLICATION %s IS %s", quoteIdent(publication), quoteLiteral(text))); err != nil {
		return fmt.Errorf("recording the creation of replication slot %s on publication %s (the role must own the publication): %w", slot, publication, err)
	}
	return nil
}

// checkSlotLost returns a SlotLost error when the pipeline's slot is invalidated, or missing
// although the publication's record says Setup created it.
func checkSlotLost(s slot, rec slotRecord, name string) error {
	switch {
	case s.Exists && s.WALStatus == WALLost:
		return slotLost(name, invalidated)
	case !s.Exists && rec.Found && rec.Slot == name:
		return slotLost(name, "was dropped (the publication records its creation"+lsnText(rec.LSN)+", but the slot no longer exists)")
	}
	return nil
}

func lsnText(lsn uint64) string {
	if lsn == 0 {
		return ""
	}
	return " at " + formatLSN(lsn)
}

// ensureSlotRecorded makes sure an existing slot has a record (a pipeline set up before records
// were kept gets one with an unknown creation point) and returns the slot's creation LSN (0:
// unknown).
func ensureSlotRecorded(ctx context.Context, conn *pgx.Conn, cfg Config, rec slotRecord, log *slog.Logger) (uint64, error) {
	if rec.Found && rec.Slot == cfg.Slot {
		if rec.Pipeline == "" && cfg.Pipeline != "" {
			// A record from before records named the pipeline: name it, keeping the creation point.
			if err := writeSlotRecord(ctx, conn, cfg.Pipeline, cfg.Publication, cfg.Slot, rec.LSN); err != nil {
				log.Warn("could not name the pipeline in the replication slot's record; another pipeline naming the same slot will not be refused at setup",
					slog.String(logSlot, cfg.Slot), slog.String(logkey.Error, err.Error()))
			}
		}
		return rec.LSN, nil
	}
	if err := writeSlotRecord(ctx, conn, cfg.Pipeline, cfg.Publication, cfg.Slot, 0); err != nil {
		// The record only guards against a later loss; a pipeline that cannot keep it still runs.
		log.Warn("could not record the replication slot; a later drop of the slot will not be recognized at setup",
			slog.String(logSlot, cfg.Slot), slog.String(logkey.Error, err.Error()))
	}
	return 0, nil
}

// TableSince returns the position from which the pipeline's slot delivers table's changes: the
// later of the slot's creation and the table's joining the publication, from the record Setup
// keeps on the publication; 0 when unknown (no record, or a slot that existed before records were
// kept, and a table that did not join later). A table whose committed position is older cannot
// continue from this slot (see Info.SlotSince and Info.Joined).
func TableSince(ctx context.Context, dsn, publication, slot string, table batch.TableName) (uint64, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rec, err := readSlotRecord(ctx, conn, publication)
	if err != nil || !rec.Found || rec.Slot != slot {
		return 0, err
	}
	return max(rec.LSN, rec.Joined[table.String()]), nil
}

// EndSlotStream terminates the walsender that streams from slot, if any, so that the slot can be
// dropped; it returns the walsender's process id (0: none). Only for a pipeline whose workflows
// are stopped: a running reader would reconnect.
func EndSlotStream(ctx context.Context, dsn, slot string) (int32, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid *int32
	err = conn.QueryRow(ctx, `SELECT active_pid FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, slot).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && pid == nil {
		return 0, nil
	}
	if err == nil {
		_, err = conn.Exec(ctx, `SELECT pg_catalog.pg_terminate_backend($1)`, *pid)
	}
	if err != nil {
		return 0, fmt.Errorf("ending the walsender of replication slot %s: %w", slot, err)
	}
	return *pid, nil
}
