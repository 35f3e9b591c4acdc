package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// testDB is a fresh database with a connection for the test's own SQL.
type testDB struct {
	dsn  string
	conn *pgx.Conn
}

func newTestDB(t *testing.T, ddl ...string) *testDB {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	db := &testDB{dsn: dsn, conn: conn}
	for _, sql := range ddl {
		db.exec(t, sql)
	}
	return db
}

func (db *testDB) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := db.conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// walLSN returns pg_current_wal_lsn().
func (db *testDB) walLSN(t *testing.T) uint64 {
	t.Helper()
	var s string
	if err := db.conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, err := parseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// slotConfirmed returns the slot's confirmed_flush_lsn.
func (db *testDB) slotConfirmed(t *testing.T, slot string) uint64 {
	t.Helper()
	s, err := readSlot(context.Background(), db.conn, slot)
	if err != nil {
		t.Fatal(err)
	}
	return s.Confirmed
}

// dropSlot drops a replication slot once no walsender holds it: a reader that just stopped
// leaves its walsender running until the server notices the closed connection.
func (db *testDB) dropSlot(t *testing.T, name string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := readSlot(context.Background(), db.conn, name)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replication slot %s still active 30 s after its reader stopped", name)
		}
	}
	db.exec(t, "SELECT pg_drop_replication_slot($1)", name)
}

// config returns a pipeline config for the tables (schema public unless qualified).
func (db *testDB) config(t *testing.T, tables ...string) Config {
	t.Helper()
	name := testenv.RandomName("sluice_test_")
	cfg := Config{DSN: db.dsn, Slot: name, Publication: name}
	for _, name := range tables {
		if !strings.Contains(name, ".") {
			name = "public." + name
		}
		tn, err := batch.ParseTableName(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tables = append(cfg.Tables, TableConfig{Table: tn})
	}
	return cfg
}

func setup(t *testing.T, cfg Config) Info {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := Setup(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	return info
}

// nothingHeld is the SafeFunc of a caller that has committed everything it was given.
func nothingHeld() (batch.Position, bool) { return batch.Position{}, false }

// stream runs a Stream from the slot until its position reaches until (a WAL LSN taken after the
// workload), and returns the events other than progress.
func stream(t *testing.T, cfg Config, schemas []batch.Schema, until uint64) []Event {
	t.Helper()
	var evs []Event
	streamFunc(t, cfg, StreamOptions{Schemas: schemas, Safe: nothingHeld}, until, func(ev Event) error {
		if _, ok := ev.(*ProgressEvent); !ok {
			evs = append(evs, ev)
		}
		return nil
	})
	return evs
}

// streamFunc runs a Stream with opts, passing events to h, until the stream's position reaches
// until; it fails the test after a minute.
func streamFunc(t *testing.T, cfg Config, opts StreamOptions, until uint64, h func(Event) error) *Stream {
	t.Helper()
	if opts.StatusInterval == 0 {
		opts.StatusInterval = 100 * time.Millisecond
	}
	if opts.ProgressInterval == 0 {
		opts.ProgressInterval = 50 * time.Millisecond
	}
	waitSlotFree(t, cfg)
	r, err := NewStream(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	errDone := errors.New("reached the target position")
	err = r.Run(ctx, func(ctx context.Context, ev Event) error {
		if err := h(ev); err != nil {
			return err
		}
		switch e := ev.(type) {
		case *CommitEvent:
			if e.EndLSN >= until {
				return errDone
			}
		case *ProgressEvent:
			if e.StreamLSN >= until {
				return errDone
			}
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("stream ended before %s: %v", formatLSN(until), err)
	}
	return r
}

// changesOf returns the change events of a table, in order.
func changesOf(evs []Event, table string) []batch.Change {
	var out []batch.Change
	for _, ev := range evs {
		if c, ok := ev.(*ChangeEvent); ok && c.Table.String() == table {
			out = append(out, c.Change)
		}
	}
	return out
}

// rowMap is a table's rows by key text, each row as its values' text ("<null>" for NULL).
type rowMap map[string][]string

func rowText(vals []batch.Value) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		switch {
		case v.Null:
			out[i] = "<null>"
		case v.Unchanged:
			out[i] = "<unchanged>"
		default:
			out[i] = string(v.Text)
		}
	}
	return out
}

// apply applies changes to rows keyed on the columns at keys.
func (m rowMap) apply(t *testing.T, keys []int, changes []batch.Change) {
	t.Helper()
	for _, c := range changes {
		if c.OldKey != nil {
			delete(m, keyString(c.OldKey, keys))
		}
		switch c.Op {
		case batch.OpDelete:
			delete(m, keyString(c.Values, keys))
		default:
			m[keyString(c.Values, keys)] = rowText(c.Values)
		}
	}
}

func (m rowMap) clone() rowMap {
	out := make(rowMap, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// diff describes the differences between two row maps, at most 10.
func (m rowMap) diff(want rowMap) string {
	var b strings.Builder
	n := 0
	for k, v := range want {
		if got, ok := m[k]; !ok {
			fmt.Fprintf(&b, "missing key %q (want %v)\n", k, v)
			n++
		} else if strings.Join(got, "|") != strings.Join(v, "|") {
			fmt.Fprintf(&b, "key %q: got %v, want %v\n", k, got, v)
			n++
		}
		if n >= 10 {
			return b.String()
		}
	}
	for k, v := range m {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "extra key %q: %v\n", k, v)
			if n++; n >= 10 {
				break
			}
		}
	}
	return b.String()
}

// readAll reads a whole table through a snapshot in chunks of size n.
func readAll(t *testing.T, snap *Snapshot, schema batch.Schema, n int) []batch.Change {
	t.Helper()
	var (
		all   []batch.Change
		after []batch.Value
	)
	for {
		chunk, err := snap.ReadChunk(context.Background(), schema, after, n)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, chunk...)
		if len(chunk) < n {
			return all
		}
		after = chunk[len(chunk)-1].Values
	}
}

// tableRows reads the current rows of a table through a fresh snapshot-free query, in text.
func (db *testDB) tableRows(t *testing.T, schema batch.Schema) rowMap {
	t.Helper()
	return db.tableRowsWhere(t, schema, "")
}

// tableRowsWhere is tableRows of the rows the row filter where keeps ("" for every row).
func (db *testDB) tableRowsWhere(t *testing.T, schema batch.Schema, where string) rowMap {
	t.Helper()
	ctx := context.Background()
	f, err := OpenFetcher(ctx, Config{DSN: db.dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	sql, err := chunkQuery(schema, where, false, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	rr := f.conn.ExecParams(ctx, sql, nil, nil, nil, nil)
	m := rowMap{}
	keys := schema.KeyIndexes()
	for rr.NextRow() {
		vals := copyRow(rr.Values())
		m[keyString(vals, keys)] = rowText(vals)
	}
	if _, err := rr.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

// safeBox is a SafeFunc a test can change while the reader runs.
type safeBox struct {
	mu   sync.Mutex
	pos  batch.Position
	held bool
}

func (s *safeBox) set(pos batch.Position, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos, s.held = pos, held
}

func (s *safeBox) get() (batch.Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos, s.held
}

// waitSlotFree waits until no walsender holds cfg's slot: a stream stopped just before returns
// when its connection closes, while the server's walsender may release the slot a moment later
// (a new stream would fail with "replication slot ... is active for PID ...").
func waitSlotFree(t *testing.T, cfg Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for {
		var active bool
		err := conn.QueryRow(ctx, `SELECT coalesce(bool_or(active), false) FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, cfg.Slot).Scan(&active)
		if err != nil {
			t.Fatalf("waiting for slot %s to be free: %v", cfg.Slot, err)
		}
		if !active {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("slot %s still active after 30 s", cfg.Slot)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
