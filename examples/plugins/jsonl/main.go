// Command jsonl is an example Sluice plugin sink without a position of its own: it writes each
// target as JSON Lines files on local disk (a directory per target holding schema.json and
// log.jsonl, the upserts and deletes by key in commit order; read them back by replaying the
// log, the last line of a key winning). The workers keep its committed positions in their
// position store (docs/position.md), so a batch can reach it twice after a crash; replaying it
// appends the same lines and leaves the same rows. The sink is package jsonlsink.
//
//	jsonl -dir /var/lib/sluice-jsonl -listen 127.0.0.1:50052
//
// Targets are dotted names of letters, digits and _.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicecdc/sluice/examples/plugins/jsonl/jsonlsink"
	"github.com/sluicecdc/sluice/sinks/plugin/sdk"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "jsonl plugin:", err)
		os.Exit(1)
	}
}

func run() error {
	var opts sdk.ServeOptions
	fs := flag.NewFlagSet("jsonl", flag.ExitOnError)
	opts.RegisterFlags(fs)
	dir := fs.String("dir", "", "directory holding one directory of files per target (created when missing)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("no directory: set -dir")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := jsonlsink.New(*dir)
	if err != nil {
		return err
	}
	opts.OwnPosition = false // the workers' position store keeps the positions
	opts.Name, opts.Version = "jsonl-example", "1"
	opts.Ready = sdk.AnnounceReady(os.Stdout)
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	return sdk.Serve(ctx, s, opts)
}
