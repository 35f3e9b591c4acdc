package source

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
)

// Info is what Setup learned about the source.
type Info struct {
	ID batch.SourceID // system identifier, timeline and slot: stored with every position
	// Schemas holds the schema of every configured table, in the order of Config.Tables.
	Schemas []batch.Schema
	// ConfirmedLSN is the slot's confirmed_flush_lsn: the stream can deliver transactions that
	// commit at or after it, nothing older. A table whose committed position is older cannot
	// resume from the stream and must be resynced.
	ConfirmedLSN uint64
	SlotCreated  bool // Setup created the slot (a new pipeline: every table needs a backfill)
	// SlotSince is the LSN the slot was created at (0: unknown, a slot that existed before
	// Setup kept records). The slot delivers only transactions committing after it, so a table
	// whose committed position is older would miss the changes in between: it must be resynced.
	SlotSince uint64
	// Joined holds the tables that joined the publication after its creation ("schema.name"),
	// each with the position it joined at: the slot delivers such a table's changes only from
	// there, so its committed position must not be older either (TableSince).
	Joined map[string]uint64
}

// TableSince is the position from which the slot delivers table's changes (0: unknown).
func (i Info) TableSince(table batch.TableName) uint64 {
	return max(i.SlotSince, i.Joined[table.String()])
}

// Setup prepares the source for a pipeline: it runs the preflight checks (returning a permanent
// *PreflightError naming every problem), creates the publication or adds missing tables to it,
// creates the logical slot (pgoutput) when missing, identifies the system and discovers the
// tables' schemas. It is idempotent: on an existing pipeline it validates and changes nothing.
// The publication is created before the slot, since a slot can only decode WAL written after its
// publication exists.
func Setup(ctx context.Context, cfg Config, log *slog.Logger) (Info, error) {
	if err := cfg.Validate(); err != nil {
		return Info{}, failure.Permanent(err)
	}
	conn, err := connect(ctx, cfg.DSN)
	if err != nil {
		return Info{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// A lost slot first: its preflight problem would hide that it is lost.
	before, err := readSlot(ctx, conn, cfg.Slot)
	if err != nil {
		return Info{}, err
	}
	rec, err := readSlotRecord(ctx, conn, cfg.Publication)
	if err != nil {
		return Info{}, err
	}
	if err := checkSlotLost(before, rec, cfg.Slot); err != nil {
		return Info{}, err
	}
	problems, err := check(ctx, conn, cfg)
	if err != nil {
		return Info{}, err
	}
	if len(problems) > 0 {
		return Info{}, failure.Permanent(&PreflightError{Problems: problems})
	}
	if _, err := ensurePublication(ctx, conn, cfg, log); err != nil {
		return Info{}, err
	}
	info := Info{}
	var created uint64
	if created, err = ensureSlot(ctx, conn, cfg.Slot, log); err != nil {
		return Info{}, err
	}
	info.SlotCreated = created != 0
	if info.SlotCreated {
		if err := writeSlotRecord(ctx, conn, cfg.Pipeline, cfg.Publication, cfg.Slot, created); err != nil {
			return Info{}, err
		}
		info.SlotSince = created
	} else if info.SlotSince, err = ensureSlotRecorded(ctx, conn, cfg, rec, log); err != nil {
		return Info{}, err
	}
	if info.ID, err = Identify(ctx, cfg); err != nil {
		return Info{}, err
	}
	s, err := readSlot(ctx, conn, cfg.Slot)
	if err != nil {
		return Info{}, err
	}
	info.ConfirmedLSN = s.Confirmed
	if rec, err = readSlotRecord(ctx, conn, cfg.Publication); err != nil {
		return Info{}, err
	}
	info.Joined = rec.Joined
	for _, tc := range cfg.Tables {
		schema, err := DiscoverSchema(ctx, conn, tc)
		if err != nil {
			return Info{}, err
		}
		info.Schemas = append(info.Schemas, schema)
	}
	return info, nil
}

// Identify runs IDENTIFY_SYSTEM on a replication connection and returns the source identity of
// the pipeline's slot.
func Identify(ctx context.Context, cfg Config) (batch.SourceID, error) {
	rconn, err := connectReplication(ctx, cfg.DSN)
	if err != nil {
		return batch.SourceID{}, err
	}
	defer rconn.Close(context.WithoutCancel(ctx))
	return identify(ctx, rconn, cfg.Slot)
}

// identify runs IDENTIFY_SYSTEM on an open replication connection: the source identity of slot.
func identify(ctx context.Context, rconn *pgconn.PgConn, slot string) (batch.SourceID, error) {
	sys, err := pglogrepl.IdentifySystem(ctx, rconn)
	if err != nil {
		return batch.SourceID{}, fmt.Errorf("identifying the source system: %w", err)
	}
	return batch.SourceID{SystemID: sys.SystemID, Timeline: sys.Timeline, Slot: slot}, nil
}

// ensurePublication creates the publication FOR TABLE the configured tables (each with the
// column list and row filter its config asks for, partitioned tables published through their
// root), or adds the tables it lacks, and returns the tables it added to an existing
// publication. Such a table was just added to the config, or it left the publication (dropped
// and re-created, or ALTER PUBLICATION ... DROP TABLE by hand): adding it back resumes its
// stream, and a warning names it, since the changes it made while out were never published (the
// reader's identity check stops or resyncs such a table: tables[].on_recreate).
func ensurePublication(ctx context.Context, conn *pgx.Conn, cfg Config, log *slog.Logger) ([]batch.TableName, error) {
	pub, err := readPublication(ctx, conn, cfg.Publication)
	if err != nil {
		return nil, err
	}
	if pub.AllTables {
		return nil, nil
	}
	var (
		clauses []string
		added   []batch.TableName
	)
	for _, t := range cfg.Tables {
		if _, ok := pub.Tables[t.Table.String()]; ok {
			continue
		}
		ti, err := readTable(ctx, conn, t.Table)
		if err != nil {
			return nil, err
		}
		clauses = append(clauses, pubTable(ti, t))
		added = append(added, t.Table)
	}
	if !pub.Exists {
		sql := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert, update, delete, truncate', publish_via_partition_root = true)",
			quoteIdent(cfg.Publication), strings.Join(clauses, ", "))
		if _, err := conn.Exec(ctx, sql); err != nil {
			return nil, fmt.Errorf("creating publication %s: %w", cfg.Publication, err)
		}
		log.Info("created publication", slog.String(logPublication, cfg.Publication), slog.Int(logkey.Tables, len(clauses)))
		return nil, nil
	}
	if len(clauses) == 0 {
		return nil, nil
	}
	// The tables join in one transaction with the record of where they joined (recordJoined): a
	// table added back after `sluice remove` must not resume from its old position.
	names := make([]string, len(added))
	for i, t := range added {
		names[i] = t.String()
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var at string
		if err := tx.QueryRow(ctx, `SELECT pg_catalog.pg_current_wal_lsn()::text`).Scan(&at); err != nil {
			return fmt.Errorf("reading the WAL position before adding tables to publication %s: %w", cfg.Publication, err)
		}
		lsn, err := parseLSN(at)
		if err != nil {
			return err
		}
		for _, c := range clauses {
			sql := fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", quoteIdent(cfg.Publication), c)
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("adding table %s to publication %s: %w", c, cfg.Publication, err)
			}
		}
		return recordJoined(ctx, tx, cfg.Publication, names, lsn)
	})
	if err != nil {
		return nil, err
	}
	for _, t := range added {
		log.Warn("added a configured table to the publication: a table just added to tables[] joins it so; one already in the pipeline "+
			"had left it (dropped and re-created, or ALTER PUBLICATION ... DROP TABLE), its changes meanwhile were never published, "+
			"and the reader's identity check stops or resyncs it (tables[].on_recreate)",
			slog.String(logPublication, cfg.Publication), slog.String(logTable, t.String()))
	}
	return added, nil
}

// ensureSlot creates the pipeline's logical slot with pgoutput when it does not exist, and
// returns the LSN it was created at (its consistent point); 0 when it existed.
func ensureSlot(ctx context.Context, conn *pgx.Conn, name string, log *slog.Logger) (uint64, error) {
	s, err := readSlot(ctx, conn, name)
	if err != nil {
		return 0, err
	}
	if s.Exists {
		return 0, nil
	}
	var lsn string
	if err := conn.QueryRow(ctx, `SELECT lsn::text FROM pg_catalog.pg_create_logical_replication_slot($1, 'pgoutput')`, name).Scan(&lsn); err != nil {
		return 0, fmt.Errorf("creating replication slot %s: %w", name, err)
	}
	log.Info("created replication slot", slog.String(logSlot, name), slog.String(logLSN, lsn))
	return parseLSN(lsn)
}

// Teardown drops the pipeline's slot and publication, when they exist. The slot must not be in
// use. Dropping the slot releases the WAL it retains; the pipeline's tables will need a backfill
// if it is set up again.
func Teardown(ctx context.Context, cfg Config) error {
	conn, err := connect(ctx, cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	s, err := readSlot(ctx, conn, cfg.Slot)
	if err != nil {
		return err
	}
	if s.Exists {
		if _, err := conn.Exec(ctx, `SELECT pg_catalog.pg_drop_replication_slot($1)`, cfg.Slot); err != nil {
			return fmt.Errorf("dropping replication slot %s: %w", cfg.Slot, err)
		}
	}
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+quoteIdent(cfg.Publication)); err != nil {
		return fmt.Errorf("dropping publication %s: %w", cfg.Publication, err)
	}
	return nil
}
