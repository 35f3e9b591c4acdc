// Command postgres is an example Sluice plugin sink with its own position: it replicates into
// tables of a PostgreSQL database, upserting and deleting rows by key, and keeps each target's
// committed position in the table sluice_plugin_positions of the same database, written in the
// same transaction as the rows. It is built on the Go SDK (sinks/plugin/sdk); docs/plugins.md
// walks through it.
//
//	SLUICE_PLUGIN_POSTGRES_DSN=postgres://... postgres -listen 127.0.0.1:50051
//
// Targets are table or schema.table (default schema public), in lower-case letters, digits and
// _; each is created on first use with the source's column types and primary key.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicecdc/sluice/sinks/plugin/sdk"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "postgres plugin:", err)
		os.Exit(1)
	}
}

func run() error {
	var opts sdk.ServeOptions
	fs := flag.NewFlagSet("postgres", flag.ExitOnError)
	opts.RegisterFlags(fs)
	dsn := fs.String("dsn", "", "the target database (better: SLUICE_PLUGIN_POSTGRES_DSN, which keeps the password out of ps)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *dsn == "" {
		*dsn = os.Getenv("SLUICE_PLUGIN_POSTGRES_DSN")
	}
	if *dsn == "" {
		return fmt.Errorf("no target database: set SLUICE_PLUGIN_POSTGRES_DSN (or -dsn)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := open(ctx, *dsn)
	if err != nil {
		return err
	}
	opts.OwnPosition = true
	opts.Name, opts.Version = "postgres-example", "1"
	opts.Health = s.health
	opts.Ready = sdk.AnnounceReady(os.Stdout)
	opts.Logger = log
	return sdk.Serve(ctx, s, opts)
}
