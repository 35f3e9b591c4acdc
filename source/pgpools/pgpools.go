// Package pgpools keeps one pgxpool.Pool per Postgres DSN, created on first use: the worker's
// pool of source connections (source.Pool) and the tests' (localrun.Pools) are built on it.
package pgpools

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrClosed is Get's error after Close.
var ErrClosed = errors.New("the connection pools are closed")

// Set is the pools by DSN. The zero Set is ready; Close closes every pool.
type Set struct {
	mu     sync.Mutex
	pools  map[string]*pgxpool.Pool
	closed bool
}

// Get returns the pool of dsn, creating it (without connecting) on first use; configure, when not
// nil, adjusts the new pool's configuration first (limits, session settings). Errors do not quote
// the DSN, which may hold a password.
func (s *Set) Get(dsn string, configure func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if pool, ok := s.pools[dsn]; ok {
		return pool, nil
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("parsing the DSN failed (not shown: it may hold a password)")
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a connection pool: %w", err)
	}
	if s.pools == nil {
		s.pools = map[string]*pgxpool.Pool{}
	}
	s.pools[dsn] = pool
	return pool, nil
}

// Close closes every pool; it waits for the connections borrowed to be released.
func (s *Set) Close() {
	s.mu.Lock()
	pools := s.pools
	s.pools, s.closed = nil, true
	s.mu.Unlock()
	for _, pool := range pools {
		pool.Close()
	}
}
