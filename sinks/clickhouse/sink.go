package clickhouse

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// Sink writes batches into ClickHouse tables of one server over the native protocol. It is safe
// for concurrent use by different tables.
type Sink struct {
	cfg     Config
	conn    driver.Conn
	version Version
	modern  bool // layout of tables the sink creates
	log     *slog.Logger

	mu     sync.Mutex
	tables map[string]bool // database.table -> layout of an existing table (true: modern)

	// afterGuard, when set by a test, runs in Apply after the guard read the position and
	// before the insert: where a stale attempt is overtaken.
	afterGuard func(context.Context)
}

var _ sinks.Sink = (*Sink)(nil)

// New validates cfg (config.ClickHouse.Validate, which fills in its defaults), connects, detects the server's version and resolves the layout of new
// tables. A configuration the server cannot satisfy (schema modern on a server before 23.2) is
// poison; an unreachable server is a transient error. The caller closes the sink.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, sinks.Poison(err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	opts := &clickhouse.Options{
		Addr:         []string{cfg.Addr},
		Protocol:     clickhouse.Native,
		Auth:         clickhouse.Auth{Database: cfg.Database, Username: cfg.Username, Password: cfg.Password},
		DialTimeout:  cfg.DialTimeout.D(),
		ReadTimeout:  cfg.ReadTimeout.D(),
		MaxOpenConns: cfg.MaxOpenConns,
		MaxIdleConns: cfg.MaxOpenConns,
		Compression:  &clickhouse.Compression{Method: clickhouse.CompressionLZ4},
	}
	if cfg.TLS.On() {
		tc, err := TLSConfig(cfg.TLS)
		if err != nil {
			return nil, sinks.Poison(err)
		}
		opts.TLS = tc
	}
	// The sink's own database may not exist yet: connect to "default" and qualify every name.
	opts.Auth.Database = config.DefaultClickHouseDatabase
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, classify(err, "connecting to clickhouse at %s", cfg.Addr)
	}
	s := &Sink{cfg: cfg, conn: conn, log: logger.With(logkey.Sink, "clickhouse"), tables: map[string]bool{}}
	if err := s.detect(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return s, nil
}

// TLSConfig is the TLS configuration of sink.clickhouse.tls: the server verified against
// ca_file (else the system's roots) under server_name when set, the client certificate
// presented when set, verification skipped only when insecure_skip_verify says so. A CA file
// that is missing or holds no certificate is an error naming sink.clickhouse.tls.ca_file.
func TLSConfig(t config.ClickHouseTLS) (*tls.Config, error) {
	return t.ClientConfig("sink.clickhouse.tls")
}

// detect reads the server's version and resolves the layout of new tables.
func (s *Sink) detect(ctx context.Context) error {
	var text string
	if err := s.conn.QueryRow(ctx, "SELECT version()").Scan(&text); err != nil {
		return classify(err, "reading the version of clickhouse at %s", s.cfg.Addr)
	}
	v, err := ParseVersion(text)
	if err != nil {
		return sinks.Poison(err)
	}
	modern, err := chooseSchema(s.cfg.Schema, v, s.cfg.Addr)
	if err != nil {
		return sinks.Poison(err)
	}
	s.version, s.modern = v, modern
	layout := config.SchemaCompatible
	if modern {
		layout = config.SchemaModern
	}
	s.log.InfoContext(ctx, "connected to clickhouse", logkey.Version, v.Text, logkey.Schema, layout)
	return nil
}

// Version returns the server's version, detected when the sink started.
func (s *Sink) Version() Version { return s.version }

// Modern reports whether tables the sink creates use the modern layout.
func (s *Sink) Modern() bool { return s.modern }

// Close releases the connections.
func (s *Sink) Close(context.Context) error {
	if err := s.conn.Close(); err != nil {
		return fmt.Errorf("closing clickhouse connections: %w", err)
	}
	return nil
}

// describe reads an existing table; ok is false when it does not exist. ClickHouse 18.16 fails
// a read of system.tables with UNKNOWN_TABLE while another connection drops or recreates a
// table of the same database (two workers evolving one target and its view): that is a race of
// the catalog, not a missing target, so the read is tried again a few times and, if the race
// persists, reported as transient, never as poison.
func (s *Sink) describe(ctx context.Context, db, name string) (e existing, ok bool, err error) {
	for attempt := 1; ; attempt++ {
		e, ok, err = s.describeOnce(ctx, db, name)
		if err == nil || exceptionCode(err) != codeUnknownTable {
			return e, ok, err
		}
		if attempt == catalogAttempts {
			// Transient: %v drops describeOnce's poison mark, which is right for a batch's table only.
			return existing{}, false, fmt.Errorf("table %s.%s: the catalog kept changing under %d reads: %v", db, name, attempt, err)
		}
		select {
		case <-ctx.Done():
			return existing{}, false, ctx.Err()
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		}
	}
}

// catalogAttempts bounds describe's reads of the catalog while other DDL races it.
const catalogAttempts = 5

// describeOnce is one read of describe.
func (s *Sink) describeOnce(ctx context.Context, db, name string) (e existing, ok bool, err error) {
	err = s.conn.QueryRow(ctx, "SELECT engine, engine_full, sorting_key FROM system.tables WHERE database = ? AND name = ?",
		db, name).Scan(&e.engine, &e.engineFull, &e.sortingKey)
	if err != nil {
		if isNoRows(err) {
			return existing{}, false, nil
		}
		return existing{}, false, classify(err, "reading table %s.%s from system.tables", db, name)
	}
	rows, err := s.conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = ?", db, name)
	if err != nil {
		return existing{}, false, classify(err, "reading the columns of %s.%s", db, name)
	}
	defer rows.Close()
	e.columns = map[string]string{}
	for rows.Next() {
		var n, t string
		if err := rows.Scan(&n, &t); err != nil {
			return existing{}, false, classify(err, "reading the columns of %s.%s", db, name)
		}
		e.columns[n] = t
		e.order = append(e.order, n)
	}
	if err := rows.Err(); err != nil {
		return existing{}, false, classify(err, "reading the columns of %s.%s", db, name)
	}
	return e, true, nil
}

// layoutOf returns the layout of spec's target as it exists in the server (ok false when the
// table does not exist), using the cached engine flavour when the table was seen before.
func (s *Sink) layoutOf(ctx context.Context, spec sinks.TableSpec) (l *layout, ok bool, err error) {
	db, name, err := splitTarget(spec.Target, s.cfg.Database)
	if err != nil {
		return nil, false, err
	}
	key := db + "." + name
	s.mu.Lock()
	modern, cached := s.tables[key]
	s.mu.Unlock()
	if !cached {
		e, exists, err := s.describe(ctx, db, name)
		if err != nil || !exists {
			return nil, false, err
		}
		if modern, err = tableModern(e, db, name); err != nil {
			return nil, false, err
		}
		s.remember(db, name, modern)
	}
	l, err = newLayout(spec, db, name, modern)
	return l, err == nil, err
}

func (s *Sink) remember(db, name string, modern bool) {
	s.mu.Lock()
	s.tables[db+"."+name] = modern
	s.mu.Unlock()
}

func (s *Sink) forget(db, name string) {
	s.mu.Lock()
	delete(s.tables, db+"."+name)
	s.mu.Unlock()
}

// EnsureTable creates the target table (and its database, and on the compatible layout its
// view) when missing, and adds new source or metadata columns to an existing one (one dropped
// from it by hand only when it holds no rows, keepDropped). A changed
// type or key is poison. Existing tables keep their layout whatever the server's version. It is
// idempotent and safe to run from several workers at once.
func (s *Sink) EnsureTable(ctx context.Context, spec sinks.TableSpec) error {
	db, name, err := splitTarget(spec.Target, s.cfg.Database)
	if err != nil {
		return err
	}
	if err := s.conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+quote(db)); err != nil {
		return classify(err, "creating clickhouse database %s", db)
	}
	e, exists, err := s.describe(ctx, db, name)
	if err != nil {
		return err
	}
	if !exists {
		l, err := newLayout(spec, db, name, s.modern)
		if err != nil {
			return err
		}
		if err := s.conn.Exec(ctx, l.createTableSQL()); err != nil {
			return classify(err, "table %s: creating clickhouse table %s.%s", l.source, db, name)
		}
		s.log.InfoContext(ctx, "created clickhouse table", logkey.Table, l.source, logkey.Target, db+"."+name, logkey.Modern, l.modern)
		// Created here or concurrently by another worker: check it like an existing table.
		if e, exists, err = s.describe(ctx, db, name); err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("table %s: clickhouse table %s.%s is missing right after CREATE TABLE; retrying", l.source, db, name)
		}
	}
	modern, err := tableModern(e, db, name)
	if err != nil {
		return err
	}
	l, err := newLayout(spec, db, name, modern)
	if err != nil {
		return err
	}
	if err := s.widen(ctx, l, &e); err != nil {
		return err
	}
	add, err := l.diff(e)
	if err != nil {
		return err
	}
	had, err := s.createdColumns(ctx, l)
	if err != nil {
		return err
	}
	if add, err = s.keepDropped(ctx, l, had, add); err != nil {
		return err
	}
	if err := s.addColumns(ctx, l, add); err != nil {
		return err
	}
	if err := s.recordColumns(ctx, l, had); err != nil {
		return err
	}
	s.remember(db, name, modern)
	if !modern {
		return s.ensureView(ctx, l, len(e.columns)+len(add), len(add) > 0)
	}
	return nil
}

// addColumns adds columns to l's table. A column another worker added meanwhile is fine; the
// table is read again to make sure every column is there with the right type.
func (s *Sink) addColumns(ctx context.Context, l *layout, add []column) error {
	raced := false
	for _, c := range add {
		err := s.conn.Exec(ctx, l.addColumnSQL(c))
		if err != nil && exceptionCode(err) == codeColumnExists {
			raced = true
			continue
		}
		if err != nil {
			return classify(err, "table %s: adding column %s %s to %s.%s", l.source, c.name, c.typ, l.db, l.name)
		}
		s.log.InfoContext(ctx, "added column", logkey.Table, l.source, logkey.Target, l.db+"."+l.name, logkey.Column, c.name, logkey.Type, c.typ)
	}
	if !raced {
		return nil
	}
	e, exists, err := s.describe(ctx, l.db, l.name)
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("table %s: %s.%s disappeared while adding columns; retrying", l.source, l.db, l.name)
	}
	if missing, err := l.diff(e); err != nil || len(missing) > 0 {
		if err == nil {
			err = sinks.Poisonf("table %s: cannot add column %s to %s.%s", l.source, missing[0].name, l.db, l.name)
		}
		return err
	}
	return nil
}

// ensureView creates the compatible table's view, recreating it when the table gained columns
// (now or in an earlier attempt): old servers expand the view's SELECT * when the view is
// created. tableCols is the number of columns of the table.
func (s *Sink) ensureView(ctx context.Context, l *layout, tableCols int, recreate bool) error {
	if !recreate {
		v, exists, err := s.describe(ctx, l.db, l.viewName())
		if err != nil {
			return err
		}
		if exists && len(v.columns) == tableCols {
			return nil
		}
		recreate = exists
	}
	if recreate {
		if err := s.conn.Exec(ctx, l.dropViewSQL()); err != nil {
			return classify(err, "table %s: dropping view %s.%s to add columns", l.source, l.db, l.viewName())
		}
	}
	if err := s.conn.Exec(ctx, l.createViewSQL()); err != nil {
		return classify(err, "table %s: creating view %s.%s", l.source, l.db, l.viewName())
	}
	return nil
}

// DiscardSnapshot empties the target table, its rows and its position markers, with TRUNCATE
// (which keeps the table's definition), and checks that it is empty. Idempotent.
func (s *Sink) DiscardSnapshot(ctx context.Context, spec sinks.TableSpec) error {
	db, name, err := splitTarget(spec.Target, s.cfg.Database)
	if err != nil {
		return err
	}
	_, exists, err := s.describe(ctx, db, name)
	if err != nil || !exists {
		return err
	}
	q := "TRUNCATE TABLE " + quote(db) + "." + quote(name)
	if err := s.conn.Exec(ctx, q); err != nil {
		return classify(err, "table %s: truncating %s.%s to discard a partial snapshot", spec.Schema.Table, db, name)
	}
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM "+quote(db)+"."+quote(name)).Scan(&n); err != nil {
		return classify(err, "table %s: counting rows of %s.%s after truncating", spec.Schema.Table, db, name)
	}
	if n != 0 {
		return fmt.Errorf("table %s: %s.%s still holds %d rows after TRUNCATE (written concurrently?); retrying",
			spec.Schema.Table, db, name, n)
	}
	s.log.InfoContext(ctx, "discarded partial snapshot", logkey.Table, spec.Schema.Table.String(), logkey.Target, db+"."+name)
	return nil
}
