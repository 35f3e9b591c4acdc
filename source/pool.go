package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicecdc/sluice/source/pgpools"
)

// Pool limits, per source database. The activities that borrow a connection run one catalog
// read each; a worker runs at most a few of them at once.
const (
	poolMaxConns = 4
	// poolIdle closes a connection unused this long, so that an idle worker holds no backend.
	poolIdle = time.Minute
)

// Pool lends regular connections to the source databases a worker reads, by DSN, for short
// reads such as a table's columns before its backfill and the slot's state for the metrics. Each
// new connection costs the server a process and a cold catalog cache (tens of milliseconds of its
// CPU on a busy server), and a pipeline of hundreds of tables would open one per table per
// backfill. Connections carry the session settings of every other source connection
// (sessionParams). Replication connections and the snapshot's reading transactions are never
// pooled: they hold server state for their life.
//
// The zero Pool is ready; Close closes every connection and refuses further borrowing.
type Pool struct {
	set pgpools.Set
}

// errPoolClosed is Acquire's error after Close.
var errPoolClosed = errors.New("the source connection pool is closed (the worker is stopping)")

// Acquire borrows a connection to dsn; the caller releases it (Release) when done, and must
// leave it as it found it: no open transaction, no changed session setting. A nil Pool opens a
// connection of its own, closed by Release.
func (p *Pool) Acquire(ctx context.Context, dsn string) (*Conn, error) {
	if p == nil {
		conn, err := connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		return &Conn{Conn: conn}, nil
	}
	pool, err := p.set.Get(dsn, configurePool)
	if errors.Is(err, pgpools.ErrClosed) {
		return nil, errPoolClosed
	}
	if err != nil {
		return nil, fmt.Errorf("source connection pool: %w", err)
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to the source database: %w", err)
	}
	return &Conn{Conn: c.Conn(), pooled: c}, nil
}

// configurePool sets a source pool's limits and session settings.
func configurePool(cfg *pgxpool.Config) {
	for k, v := range sessionParams {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.MaxConns = poolMaxConns
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = poolIdle
	cfg.HealthCheckPeriod = poolIdle / 2
}

// Close closes every pooled connection; it waits for the connections borrowed to be released.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.set.Close()
}

// Conn is a borrowed source connection.
type Conn struct {
	*pgx.Conn
	pooled *pgxpool.Conn
}

// Release returns the connection to its pool, or closes it when it has none. The pool closes
// instead of reusing a connection left in a transaction, busy or broken (pgxpool's Release).
func (c *Conn) Release(ctx context.Context) {
	if c.pooled == nil {
		_ = c.Conn.Close(context.WithoutCancel(ctx))
		return
	}
	c.pooled.Release()
}
