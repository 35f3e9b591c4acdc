// Command bench measures Sluice's backfill and stream against the limits of the PostgreSQL it
// reads from, in one run, prints one table and writes docs/benchmarks.md. It is separate from the
// tests: `make bench`.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/internal/bench"
	"github.com/sluicecdc/sluice/internal/devstack"
)

func main() {
	rows := flag.Int("rows", 2_000_000, "rows of the benchmark table")
	smallTx := flag.Int("small-tx", 400_000, "single-row transactions of the stream workload")
	out := flag.String("out", "docs/benchmarks.md", "where to write the report (empty: do not write)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *rows, *smallTx, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rows, smallTx int, out string) error {
	stack, err := devstack.New("", "", slog.Default())
	if err != nil {
		return err
	}
	pg, err := stack.Ensure(ctx, devstack.ServicePostgres)
	if err != nil {
		return err
	}
	dsn, err := freshDatabase(ctx, pg.URL, "sluice_bench")
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting to the benchmark database: %w", err)
	}
	defer conn.Close(context.Background())

	report := bench.Report{Date: time.Now().UTC(), Machine: bench.Machine(), Rows: rows}
	fmt.Fprintf(os.Stderr, "creating public.orders with %d rows\n", rows)
	if err := bench.CreateOrders(ctx, conn, rows); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE PUBLICATION bench_pub FOR TABLE public.orders"); err != nil {
		return fmt.Errorf("creating publication: %w", err)
	}
	res, err := bench.CopyBinaryLimit(ctx, conn, "public.orders")
	if err != nil {
		return err
	}
	report.Results = append(report.Results, res)

	bulk := rows / 4
	res, err = bench.RecvLogicalLimit(ctx, conn, pg.Extra["bin"], dsn, "bulk UPDATE in one transaction", int64(bulk),
		bench.BulkUpdate(conn, bulk))
	if err != nil {
		return err
	}
	report.Results = append(report.Results, res)
	res, err = bench.RecvLogicalLimit(ctx, conn, pg.Extra["bin"], dsn, "single-row UPDATE transactions", int64(smallTx),
		bench.SmallTransactions(pg.Extra["bin"], dsn, smallTx, rows))
	if err != nil {
		return err
	}
	res.Note = "4 pgbench clients"
	report.Results = append(report.Results, res)

	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Benchmarks\n\nMeasured %s on %s, with a %d-row, 7-column table.\n\n",
		report.Date.Format("2006-01-02 15:04 MST"), report.Machine, rows)
	report.WriteTable(&buf, nil)
	fmt.Fprintln(&buf, "\nSluice's own backfill and stream figures join this table as the pipeline's parts land (issue 9).")
	os.Stdout.Write(buf.Bytes())
	if out != "" {
		if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", out, err)
		}
	}
	return nil
}

// freshDatabase drops and recreates a database and returns its DSN.
func freshDatabase(ctx context.Context, adminDSN, name string) (string, error) {
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer admin.Close(context.Background())
	_, _ = admin.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1", name)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", "CREATE DATABASE " + name} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	u, err := url.Parse(adminDSN)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}
