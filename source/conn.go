package source

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// connect opens a regular connection with the session parameters both value paths share.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing source DSN: %w", errRedacted)
	}
	for k, v := range sessionParams {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the source database: %w", err)
	}
	return conn, nil
}

// connectReplication opens a logical replication (walsender) connection.
func connectReplication(ctx context.Context, dsn string) (*pgconn.PgConn, error) {
	cfg, err := connConfig(dsn, true)
	if err != nil {
		return nil, err
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening a replication connection to the source database: %w", err)
	}
	return conn, nil
}

// parseLSN parses an LSN printed as 16/B374D848.
func parseLSN(s string) (uint64, error) {
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return 0, fmt.Errorf("parsing LSN %q: %w", s, err)
	}
	return uint64(lsn), nil
}

// formatLSN prints an LSN as Postgres does.
func formatLSN(lsn uint64) string { return pglogrepl.LSN(lsn).String() }
