// Command demo runs Sluice's embedded default against the services cmd/devstack started: it
// creates the demo database with a sample schema and data, and shows where everything is.
//
// The pipeline part of the demo (worker, starter, live changes into a local Iceberg warehouse)
// arrives with the Iceberg sink; until then the demo prepares the source and the stack only.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/internal/devstack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	stack, err := devstack.New("", "", slog.Default())
	if err != nil {
		return err
	}
	pg, err := stack.Ensure(ctx, devstack.ServicePostgres)
	if err != nil {
		return err
	}
	temporal, err := stack.Ensure(ctx, devstack.ServiceTemporal)
	if err != nil {
		return err
	}
	dsn, err := seed(ctx, pg.URL, 10_000)
	if err != nil {
		return err
	}
	fmt.Printf("Source:      %s (table public.orders, 10000 rows)\n", dsn)
	fmt.Printf("Temporal:    %s\nWeb UI:      %s\n", temporal.Addr, temporal.Extra["ui"])
	fmt.Println("The Iceberg pipeline of the demo is not built yet (see the README's status); the stack is up.")
	fmt.Println("Stop everything with: make stop")
	return nil
}

// seed creates the demo database with public.orders holding n rows, unless it exists, and
// returns its DSN.
func seed(ctx context.Context, adminDSN string, n int) (string, error) {
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer admin.Close(context.Background())
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = 'demo')").Scan(&exists); err != nil {
		return "", fmt.Errorf("looking for the demo database: %w", err)
	}
	if !exists {
		if _, err := admin.Exec(ctx, "CREATE DATABASE demo"); err != nil {
			return "", fmt.Errorf("creating the demo database: %w", err)
		}
	}
	u, err := url.Parse(adminDSN)
	if err != nil {
		return "", err
	}
	u.Path = "/demo"
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return "", fmt.Errorf("connecting to the demo database: %w", err)
	}
	defer conn.Close(context.Background())
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = conn.Exec(ctx, fmt.Sprintf(`
CREATE TABLE IF NOT EXISTS public.orders (
	id          bigint PRIMARY KEY,
	customer    text NOT NULL,
	amount      numeric(12,2) NOT NULL,
	status      text NOT NULL,
	tags        text[],
	created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO public.orders (id, customer, amount, status, tags, created_at)
SELECT g, 'customer-' || (g %% 500), round((g * 7.31)::numeric %% 1000, 2),
       (ARRAY['new','paid','shipped','delivered'])[1 + g %% 4],
       ARRAY['demo', 'batch-' || (g / 1000)], now() - (g || ' minutes')::interval
FROM generate_series(1, %d) g
ON CONFLICT (id) DO NOTHING;`, n))
	if err != nil {
		return "", fmt.Errorf("seeding public.orders: %w", err)
	}
	return u.Redacted(), nil
}
