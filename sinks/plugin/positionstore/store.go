package positionstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// DefaultSchema is the schema the store's table is created in when Options.Schema is empty.
const DefaultSchema = "sluice"

// TableName is the store's table in its schema.
const TableName = "plugin_positions"

// DefaultLockTimeout bounds how long a commit waits for another attempt that holds its table's
// position (see Options.LockTimeout).
const DefaultLockTimeout = 20 * time.Second

// ddlLockKey is the advisory lock that serializes the creation of the store's schema and table
// between workers starting at once (CREATE ... IF NOT EXISTS races on the catalog).
const ddlLockKey = 0x511CE0005

// Options configure a Store.
type Options struct {
	// DSN is the Postgres database holding the store (a postgres:// URL or key=value pairs). The
	// user needs CREATE on the database while the schema or table is missing, then SELECT,
	// INSERT and UPDATE on the table.
	DSN string
	// Schema holds the store's table (DefaultSchema when empty): created when missing.
	Schema string
	// Pipeline names the pipeline whose positions this Store reads and writes.
	Pipeline string
	// LockTimeout bounds the wait of a commit whose table's position another attempt holds
	// (DefaultLockTimeout when zero); the commit then fails as transient and is retried.
	LockTimeout time.Duration
	// Existing opens only a store whose table exists, creating nothing: Open returns ErrNoStore
	// when it is missing. For a plugin with its own position, which needs a store only when one
	// was kept before it gained the capability.
	Existing bool
}

// ErrNoStore is returned by Open with Options.Existing when the store's table does not exist.
var ErrNoStore = errors.New("the position store's table does not exist")

// Store is the out-of-sink position store of one pipeline. It is safe for concurrent use.
type Store struct {
	pool        *pgxpool.Pool
	table       string // quoted schema.table
	pipeline    string
	lockTimeout time.Duration
}

// Open connects to the store's database and creates its schema and table when missing. It is
// idempotent; concurrent Opens (several workers) are safe.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if !batch.PlainName(o.Schema) {
		return nil, fmt.Errorf("position store schema %q: use letters, digits and _", o.Schema)
	}
	if o.Pipeline == "" {
		return nil, errors.New("position store: no pipeline name")
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	cfg, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		return nil, fmt.Errorf("position store: parsing the DSN: %w", err)
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["application_name"] = "sluice-position-store"
	// A commit holds its table's row lock while the plugin applies the batch. A worker that
	// vanishes from the network (no FIN, no RST) would keep it until the server notices the dead
	// connection: Linux' default keepalive takes two hours. These make the server drop it within
	// about 25 s, so the retry on another worker can take the position.
	rp["tcp_keepalives_idle"] = "10"
	rp["tcp_keepalives_interval"] = "5"
	rp["tcp_keepalives_count"] = "3"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("position store: connecting: %w", err)
	}
	s := &Store{pool: pool, table: pgx.Identifier{o.Schema, TableName}.Sanitize(), pipeline: o.Pipeline, lockTimeout: o.LockTimeout}
	if err := s.create(ctx, o.Schema, o.Existing); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// create creates the schema and table when missing (unless existing: then a missing table is
// ErrNoStore), under an advisory lock. It creates nothing when the table exists, so a user without CREATE on the database can use a store an
// administrator created.
func (s *Store) create(ctx context.Context, schema string, existing bool) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", s.table).Scan(&exists); err != nil {
		return fmt.Errorf("position store: looking for table %s: %w", s.table, err)
	}
	if exists {
		return nil
	}
	if existing {
		return fmt.Errorf("position store: table %s: %w", s.table, ErrNoStore)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(ddlLockKey)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
	pipeline   text NOT NULL,
	target     text NOT NULL,
	system_id  text,
	timeline   integer,
	slot       text,
	lsn        pg_lsn,
	seq        bigint,
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (pipeline, target))`)
		return err
	})
	if err != nil {
		return fmt.Errorf("position store: creating table %s (the user needs CREATE on the database, or an administrator creates it; docs/position.md): %w", s.table, err)
	}
	return nil
}

// Close closes the store's connections.
func (s *Store) Close() { s.pool.Close() }

// Position returns the position the store holds for target; ok is false when it holds none.
func (s *Store) Position(ctx context.Context, target string) (batch.SourcePosition, bool, error) {
	row := s.pool.QueryRow(ctx, `SELECT system_id, timeline, slot, lsn::text, seq FROM `+s.table+
		` WHERE pipeline = $1 AND target = $2 AND lsn IS NOT NULL`, s.pipeline, target)
	pos, ok, err := scanPosition(row)
	if err != nil {
		return pos, ok, fmt.Errorf("position store: reading the position of target %s: %w", target, err)
	}
	return pos, ok, nil
}

func scanPosition(row pgx.Row) (batch.SourcePosition, bool, error) {
	var (
		sys, slot, lsn *string
		tl             *int32
		seq            *int64
	)
	if err := row.Scan(&sys, &tl, &slot, &lsn, &seq); errors.Is(err, pgx.ErrNoRows) {
		return batch.SourcePosition{}, false, nil
	} else if err != nil {
		return batch.SourcePosition{}, false, err
	}
	if lsn == nil || sys == nil || tl == nil || slot == nil || seq == nil {
		return batch.SourcePosition{}, false, nil
	}
	p, err := batch.ParsePosition(*lsn + ":" + fmt.Sprint(*seq))
	if err != nil {
		return batch.SourcePosition{}, false, err
	}
	return batch.SourcePosition{Source: batch.SourceID{SystemID: *sys, Timeline: *tl, Slot: *slot}, Position: p}, true, nil
}

// hold is a target's store row, locked for one commit: the transaction holding the lock and the
// position it read. Concurrent commits of the same target (a stale attempt and its retry) wait
// for each other, so the guard's check and the position's write are one step.
type hold struct {
	tx     pgx.Tx
	store  *Store
	target string
	pos    batch.SourcePosition
	ok     bool
}

// hold locks target's row (creating it without a position when missing) and reads its position.
// A lock not obtained within the lock timeout is a transient error. The caller ends the hold
// with commit or release.
func (s *Store) hold(ctx context.Context, target string) (*hold, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("position store: starting the commit of target %s: %w", target, err)
	}
	h := &hold{tx: tx, store: s, target: target}
	if err := h.lock(ctx); err != nil {
		h.release()
		return nil, err
	}
	return h, nil
}

func (h *hold) lock(ctx context.Context) error {
	s := h.store
	if _, err := h.tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", s.lockTimeout.Milliseconds())); err != nil {
		return fmt.Errorf("position store: setting the lock timeout: %w", err)
	}
	if _, err := h.tx.Exec(ctx, `INSERT INTO `+s.table+` (pipeline, target) VALUES ($1, $2) ON CONFLICT DO NOTHING`, s.pipeline, h.target); err != nil {
		return h.lockError(err)
	}
	row := h.tx.QueryRow(ctx, `SELECT system_id, timeline, slot, lsn::text, seq FROM `+s.table+
		` WHERE pipeline = $1 AND target = $2 FOR UPDATE`, s.pipeline, h.target)
	pos, ok, err := scanPosition(row)
	if err != nil {
		return h.lockError(err)
	}
	h.pos, h.ok = pos, ok
	return nil
}

func (h *hold) lockError(err error) error {
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "55P03" {
		return fmt.Errorf("position store: the position of target %s is held by another commit attempt still running "+
			"(an attempt that outlived its heartbeat timeout, or one on a worker that vanished: the server drops its lock with its connection, within about 25 s); "+
			"retrying: %w", h.target, err)
	}
	return fmt.Errorf("position store: locking the position of target %s: %w", h.target, err)
}

// advance sets the held position to hi when hi is ahead of it (or none is held). A hi at or
// behind the held position leaves it: a stale attempt never moves the store back. A hi of
// another source is poison.
func (h *hold) advance(ctx context.Context, hi batch.SourcePosition) error {
	if h.ok {
		c, err := hi.Compare(h.pos)
		if err != nil {
			return sinks.Poisonf("position store: target %s holds position %s, the batch up to %s belongs to another source: %w; resync the table",
				h.target, h.pos, hi, err)
		}
		if c <= 0 {
			return nil
		}
	}
	_, err := h.tx.Exec(ctx, `UPDATE `+h.store.table+` SET system_id = $3, timeline = $4, slot = $5, lsn = $6::pg_lsn, seq = $7, updated_at = now()
WHERE pipeline = $1 AND target = $2`, h.store.pipeline, h.target,
		hi.Source.SystemID, hi.Source.Timeline, hi.Source.Slot, string(batch.AppendLSN(nil, hi.Position.LSN)), int64(hi.Position.Seq))
	if err != nil {
		return fmt.Errorf("position store: writing position %s of target %s: %w", hi, h.target, err)
	}
	h.pos, h.ok = hi, true
	return nil
}

// clear removes the held position.
func (h *hold) clear(ctx context.Context) error {
	_, err := h.tx.Exec(ctx, `UPDATE `+h.store.table+` SET system_id = NULL, timeline = NULL, slot = NULL, lsn = NULL, seq = NULL, updated_at = now()
WHERE pipeline = $1 AND target = $2`, h.store.pipeline, h.target)
	if err != nil {
		return fmt.Errorf("position store: clearing the position of target %s: %w", h.target, err)
	}
	return nil
}

// commit makes the hold's writes durable and releases the lock.
func (h *hold) commit(ctx context.Context) error {
	if err := h.tx.Commit(ctx); err != nil {
		return fmt.Errorf("position store: committing the position of target %s: %w", h.target, err)
	}
	return nil
}

// release rolls back what was not committed and releases the lock. It runs under its own
// context, so a cancelled commit still frees the row at once.
func (h *hold) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = h.tx.Rollback(ctx) // after commit: ErrTxClosed; a broken connection is closed by pgx
}
