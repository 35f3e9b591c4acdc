package localrun

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/source/pgpools"
)

// Pools lends connections to the databases a test binary's tests read and write, by DSN. The
// tests poll their sources every second and write in rounds; a connection each time costs the
// server a process and a cold catalog cache, tens of milliseconds of CPU on a loaded machine,
// and was the largest share of the shared Postgres' work in make test. A borrowed connection is
// left as it was found (a statement that failed inside a transaction leaves it aborted: the
// pool closes it instead of lending it again). Connections to a dropped database or a stopped
// server fail at their next use and are replaced.
//
// The zero Pools is ready; Close closes every connection.
type Pools struct {
	set pgpools.Set
}

// Exec runs statements in order on one connection to dsn, stopping at the first that fails.
func (p *Pools) Exec(ctx context.Context, dsn string, stmts ...string) error {
	return p.With(ctx, dsn, func(conn *pgx.Conn) error {
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	})
}

// QueryRow runs a query that returns one row on dsn and scans it into dst.
func (p *Pools) QueryRow(ctx context.Context, dsn, sql string, args []any, dst ...any) error {
	return p.With(ctx, dsn, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, sql, args...).Scan(dst...)
	})
}

// Scan is ScanPostgres on a borrowed connection.
func (p *Pools) Scan(ctx context.Context, dsn, table, key string, columns []string) (Table, error) {
	var out Table
	err := p.With(ctx, dsn, func(conn *pgx.Conn) error {
		var err error
		out, err = scanPostgres(ctx, conn, table, key, columns)
		return err
	})
	return out, err
}

// With calls f with a connection to dsn borrowed for the call.
func (p *Pools) With(ctx context.Context, dsn string, f func(*pgx.Conn) error) error {
	pool, err := p.set.Get(dsn, nil)
	if err != nil {
		return err
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connecting to the source: %w", err)
	}
	defer c.Release()
	return f(c.Conn())
}

// Close closes every pool.
func (p *Pools) Close() { p.set.Close() }
