package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
)

// Snapshot is an exported snapshot whose LSN is exact with respect to the pipeline slot's stream,
// and a connection that reads tables under it.
//
// It is made as Postgres' own table synchronization makes one: a temporary logical slot created
// with EXPORT_SNAPSHOT on a replication connection that stays open (and idle) while the snapshot
// is read. The slot's consistent point is the snapshot's LSN S: the snapshot sees exactly the
// transactions whose commit record lies before S, and a logical slot delivers exactly the
// transactions whose commit LSN is at or after its start. So for the pipeline slot, whose stream
// positions are (commit LSN, sequence from 1):
//
//   - a change with commit LSN < S is contained in the snapshot: skip it for a table whose
//     snapshot is S;
//   - a change with commit LSN >= S follows the snapshot: apply it after the snapshot rows.
//
// Snapshot rows carry the position (S, 0), which sorts below every stream position (S, n>=1)
// of a transaction committing at S, and above every position of a transaction committing
// before S. Comparing positions is therefore the whole rule: no gap, no overlap.
//
// A Snapshot is safe for concurrent use. Each read takes one of its reading connections (one
// unless OpenConns opened more), each a transaction that imported the snapshot, so they see
// the same rows.
type Snapshot struct {
	mu     sync.Mutex       // guards rconn, conns and closed
	rconn  *pgconn.PgConn   // holds the exported snapshot and the temporary slot
	conns  []*pgconn.PgConn // REPEATABLE READ transactions that imported the snapshot
	free   chan *pgconn.PgConn
	closed bool
	dsn    string
	name   string
	lsn    uint64
	ts     time.Time
	slot   string
	id     batch.SourceID             // the source identity of the pipeline's slot
	where  map[batch.TableName]string // the row filters of the configured tables (tables[].where)
}

// OpenSnapshot exports a snapshot and opens a transaction that reads under it.
//
// The pipeline slot must not have confirmed past the snapshot's LSN, or the changes between
// would be lost for the tables read from this snapshot: before calling, the caller must already
// hold the tables it backfills as outstanding at a position no higher than the slot's confirmed
// position (the reader's Confirmed, or Info.ConfirmedLSN), and hold them at LSN() afterwards
// until their snapshot rows are committed. OpenSnapshot checks the slot and fails when it has
// moved past.
func OpenSnapshot(ctx context.Context, cfg Config) (s *Snapshot, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, failure.Permanent(err)
	}
	rconn, err := connectReplication(ctx, cfg.DSN)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			rconn.Close(context.WithoutCancel(ctx))
		}
	}()
	// The snapshot's own replication connection identifies the source, sparing the server a
	// connection (a process) per backfill.
	id, err := identify(ctx, rconn, cfg.Slot)
	if err != nil {
		return nil, err
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := snapshotSlotPrefix + hex.EncodeToString(suffix[:])
	res, err := pglogrepl.CreateReplicationSlot(ctx, rconn, tmp, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Temporary: true, SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		return nil, fmt.Errorf("creating temporary slot to export a snapshot: %w", err)
	}
	lsn, err := parseLSN(res.ConsistentPoint)
	if err != nil {
		return nil, err
	}
	conn, err := importSnapshot(ctx, cfg.DSN, res.SnapshotName)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	s = &Snapshot{rconn: rconn, conns: []*pgconn.PgConn{conn}, free: make(chan *pgconn.PgConn, MaxSnapshotConns),
		dsn: cfg.DSN, name: res.SnapshotName, lsn: lsn, slot: tmp, id: id, where: map[batch.TableName]string{}}
	s.free <- conn
	for _, t := range cfg.Tables {
		s.where[t.Table] = t.Where
	}
	row, err := s.queryRow(ctx, `SELECT now()::text, (SELECT confirmed_flush_lsn::text FROM pg_catalog.pg_replication_slots WHERE slot_name = $1)`, []byte(cfg.Slot))
	if err != nil {
		return nil, fmt.Errorf("reading the snapshot's time: %w", err)
	}
	if s.ts, err = time.Parse("2006-01-02 15:04:05.999999-07", string(row[0])); err != nil {
		return nil, fmt.Errorf("parsing the snapshot's time %q: %w", row[0], err)
	}
	if row[1] != nil {
		confirmed, err := parseLSN(string(row[1]))
		if err != nil {
			return nil, err
		}
		if confirmed > lsn {
			return nil, fmt.Errorf("slot %s has confirmed %s, past the snapshot's %s: the changes between would be lost; hold the safe position at or below the slot's confirmed position while a snapshot is opened",
				cfg.Slot, formatLSN(confirmed), formatLSN(lsn))
		}
	}
	return s, nil
}

// LSN returns the snapshot's consistent LSN: snapshot rows have position (LSN, 0).
func (s *Snapshot) LSN() uint64 { return s.lsn }

// Name returns the exported snapshot's name (SET TRANSACTION SNAPSHOT), valid until Close.
func (s *Snapshot) Name() string { return s.name }

// Source returns the source identity of the pipeline's slot (system, timeline, slot), as
// IDENTIFY_SYSTEM on the snapshot's connection reported it.
func (s *Snapshot) Source() batch.SourceID { return s.id }

// Time returns the time the snapshot was taken, the CommitTS of its rows.
func (s *Snapshot) Time() time.Time { return s.ts }

// Close waits for the reads in flight, ends the reading transactions and closes every
// connection, which drops the temporary slot. It is idempotent.
func (s *Snapshot) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns, rconn := s.conns, s.rconn
	s.conns, s.rconn = nil, nil
	s.mu.Unlock()
	var err1 error
	for range conns {
		conn := <-s.free // a read in flight returns its connection first
		_, _ = conn.Exec(ctx, "COMMIT").ReadAll()
		if err := conn.Close(ctx); err != nil && err1 == nil {
			err1 = err
		}
	}
	close(s.free)
	err2 := rconn.Close(ctx)
	if err1 != nil {
		return fmt.Errorf("closing snapshot connection: %w", err1)
	}
	if err2 != nil {
		return fmt.Errorf("closing snapshot replication connection: %w", err2)
	}
	return nil
}

// MaxSnapshotConns bounds the reading connections of one snapshot (OpenConns).
const MaxSnapshotConns = 32

// importSnapshot connects and opens a read-only REPEATABLE READ transaction that imported the
// exported snapshot name.
func importSnapshot(ctx context.Context, dsn, name string) (*pgconn.PgConn, error) {
	cc, err := connConfig(dsn, false)
	if err != nil {
		return nil, err
	}
	conn, err := pgconn.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connecting to read the snapshot: %w", err)
	}
	begin := "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SET TRANSACTION SNAPSHOT " + quoteLiteral(name)
	if _, err := conn.Exec(ctx, begin).ReadAll(); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("importing snapshot %s: %w", name, err)
	}
	return conn, nil
}

// OpenConns opens reading connections until the snapshot has n (at most MaxSnapshotConns),
// each a transaction that imported it, so that n reads run at once. Each holds one of the
// server's max_connections until Close. It is idempotent.
func (s *Snapshot) OpenConns(ctx context.Context, n int) error {
	n = min(n, MaxSnapshotConns)
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.closed && len(s.conns) < n {
		conn, err := importSnapshot(ctx, s.dsn, s.name)
		if err != nil {
			return fmt.Errorf("opening connection %d of %d of snapshot %s: %w", len(s.conns)+1, n, s.name, err)
		}
		s.conns = append(s.conns, conn)
		s.free <- conn
	}
	if s.closed {
		return fmt.Errorf("opening connections of snapshot %s: the snapshot is closed", s.name)
	}
	return nil
}

// acquire takes a free reading connection, waiting for one; put returns it.
func (s *Snapshot) acquire(ctx context.Context) (conn *pgconn.PgConn, put func(), err error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, nil, errSnapshotClosed
	}
	select {
	case conn, ok := <-s.free:
		if !ok {
			return nil, nil, errSnapshotClosed
		}
		return conn, func() { s.free <- conn }, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// Estimate returns the number of rows of the table for progress: pg_class.reltuples, or an exact
// count under the snapshot when the table was never analyzed.
func (s *Snapshot) Estimate(ctx context.Context, table batch.TableName) (int64, error) {
	row, err := s.queryRow(ctx, `SELECT reltuples::bigint FROM pg_catalog.pg_class WHERE oid = $1::regclass`, []byte(quoteTable(table)))
	if err != nil {
		return 0, fmt.Errorf("estimating rows of table %s: %w", table, err)
	}
	n, err := strconv.ParseInt(string(row[0]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("estimating rows of table %s: %w", table, err)
	}
	if n >= 0 {
		return n, nil
	}
	if row, err = s.queryRow(ctx, "SELECT count(*) FROM "+quoteTable(table)); err != nil {
		return 0, fmt.Errorf("counting rows of table %s: %w", table, err)
	}
	return strconv.ParseInt(string(row[0]), 10, 64)
}

// ReadChunk reads up to limit rows of the table in key order (only those its row filter keeps,
// when cfg.Tables of OpenSnapshot gives it one), after the row whose values are
// after (the Values of the last row of the previous chunk; nil for the first chunk). Rows come
// as OpSnapshot changes at (LSN, 0) with values in the text form the stream uses (read by
// CopyChunk with every column as text). Fewer than
// limit rows means the table is done. The schema must be the one the snapshot sees.
func (s *Snapshot) ReadChunk(ctx context.Context, schema batch.Schema, after []batch.Value, limit int) ([]batch.Change, error) {
	changes := make([]batch.Change, 0, limit)
	var rows rowArena
	_, err := s.CopyChunk(ctx, schema, after, KeyRange{}, limit, nil, func(c *batch.Change, raw [][]byte) error {
		ch := *c
		ch.Values = rows.copyRow(raw)
		changes = append(changes, ch)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changes, nil
}

// ScanChunk reads the rows ReadChunk reads without keeping them: each row goes to row as its
// change (OpSnapshot at (LSN, 0), no Values) and its values (nil for NULL), which alias the
// connection's buffer and are valid only until row returns. formats gives each column's result
// format (batch.FormatText or batch.FormatBinary; nil: all text); key columns must be text. An
// error from row stops the scan and is returned as is. It returns the key columns' values of the
// last row (copied; nil when there was none), the next chunk's after.
func (s *Snapshot) ScanChunk(ctx context.Context, schema batch.Schema, after []batch.Value, limit int, formats []int16,
	row func(c *batch.Change, raw [][]byte) error) (last []batch.Value, err error) {
	if err := checkScan(schema, after, limit, formats); err != nil {
		return nil, err
	}
	sql, err := chunkQuery(schema, s.where[schema.Table], after != nil, limit)
	if err != nil {
		return nil, failure.Permanent(err)
	}
	keys := schema.KeyIndexes()
	var params [][]byte
	if after != nil {
		for _, k := range keys {
			params = append(params, after[k].Text)
		}
	}
	conn, put, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading table %s: %w", schema.Table, err)
	}
	defer put()
	rr := conn.ExecParams(ctx, sql, params, nil, nil, formats)
	if n := len(rr.FieldDescriptions()); n != len(schema.Columns) && n != 0 {
		_, _ = rr.Close()
		return nil, fmt.Errorf("reading table %s: got %d columns, the schema has %d", schema.Table, n, len(schema.Columns))
	}
	c := batch.Change{Op: batch.OpSnapshot, Pos: batch.Position{LSN: s.lsn}, CommitTS: s.ts}
	// The last row's key is kept as the rows go by: the connection reuses its buffer.
	lastKey := make([][]byte, len(keys))
	n := 0
	for rr.NextRow() {
		raw := rr.Values()
		if err := row(&c, raw); err != nil {
			_, _ = rr.Close()
			return nil, err
		}
		for i, k := range keys {
			lastKey[i] = append(lastKey[i][:0], raw[k]...)
		}
		n++
	}
	if n > 0 {
		last = make([]batch.Value, len(schema.Columns))
		for i, k := range keys {
			last[k] = batch.Value{Text: lastKey[i]}
		}
	}
	if _, err := rr.Close(); err != nil {
		return nil, fmt.Errorf("reading table %s under snapshot %s: %w", schema.Table, s.name, err)
	}
	return last, nil
}

// rowArena copies rows out of the connection's buffer into a few large allocations instead of
// two per row: values and bytes are carved from slabs that the rows of a chunk share. A row's
// slices are capped at their length, so appending to one never writes into another.
type rowArena struct {
	vals []batch.Value
	buf  []byte
}

// arenaRows and arenaBytes size the slabs: large enough to make allocations rare, small enough
// that a short chunk does not hold much unused memory.
const (
	arenaRows  = 4096
	arenaBytes = 1 << 20
)

// copyRow copies one row's values (nil is NULL) into the arena.
func (a *rowArena) copyRow(raw [][]byte) []batch.Value {
	n := 0
	for _, v := range raw {
		n += len(v)
	}
	if len(a.vals)+len(raw) > cap(a.vals) {
		a.vals = make([]batch.Value, 0, max(arenaRows*len(raw), len(raw)))
	}
	if len(a.buf)+n > cap(a.buf) {
		a.buf = make([]byte, 0, max(arenaBytes, n))
	}
	start := len(a.vals)
	a.vals = a.vals[:start+len(raw)]
	vals := a.vals[start : start+len(raw) : start+len(raw)]
	for i, v := range raw {
		if v == nil {
			vals[i] = batch.Value{Null: true}
			continue
		}
		b := len(a.buf)
		a.buf = append(a.buf, v...)
		vals[i] = batch.Value{Text: a.buf[b:len(a.buf):len(a.buf)]}
	}
	return vals
}

// queryRow runs sql with text parameters and returns its single row's values (copied).
func (s *Snapshot) queryRow(ctx context.Context, sql string, params ...[]byte) ([][]byte, error) {
	conn, put, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer put()
	res := conn.ExecParams(ctx, sql, params, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	if len(res.Rows) != 1 {
		return nil, fmt.Errorf("want 1 row, got %d", len(res.Rows))
	}
	return res.Rows[0], nil
}

// copyRow copies one row's values out of the connection's buffer into one allocation of its own
// (for rows that outlive the read, unlike a chunk's).
func copyRow(raw [][]byte) []batch.Value {
	n := 0
	for _, v := range raw {
		n += len(v)
	}
	buf := make([]byte, 0, n)
	vals := make([]batch.Value, len(raw))
	for i, v := range raw {
		if v == nil {
			vals[i].Null = true
			continue
		}
		start := len(buf)
		buf = append(buf, v...)
		vals[i].Text = buf[start:len(buf):len(buf)]
	}
	return vals
}
