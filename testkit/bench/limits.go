package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// CreateOrders creates public.orders with n rows and 7 columns, the shape of the reference table
// in ENVIRONMENT.md, replacing any earlier one.
func CreateOrders(ctx context.Context, conn *pgx.Conn, n int) error {
	_, err := conn.Exec(ctx, fmt.Sprintf(`
DROP TABLE IF EXISTS public.orders;
CREATE TABLE public.orders (
	id          bigint PRIMARY KEY,
	customer_id int NOT NULL,
	amount      numeric(12,2) NOT NULL,
	status      text NOT NULL,
	note        text,
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL
);
INSERT INTO public.orders
SELECT g, g %% 100000, round((g * 7.31)::numeric %% 10000, 2),
       (ARRAY['new','paid','shipped','delivered'])[1 + g %% 4],
       repeat('x', 100 + g %% 50),
       '2020-01-01'::timestamptz + (g || ' seconds')::interval,
       '2020-01-01'::timestamptz + (g || ' seconds')::interval
FROM generate_series(1, %d) g;`, n))
	if err != nil {
		return fmt.Errorf("creating public.orders with %d rows: %w", n, err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE public.orders"); err != nil {
		return fmt.Errorf("vacuuming public.orders: %w", err)
	}
	return nil
}

// CopyBinaryLimit measures limit 1: the table copied in binary format to nowhere.
func CopyBinaryLimit(ctx context.Context, conn *pgx.Conn, table string) (Result, error) {
	var rows int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&rows); err != nil {
		return Result{}, fmt.Errorf("counting %s: %w", table, err)
	}
	counter := &countingWriter{}
	start := time.Now()
	tag, err := conn.PgConn().CopyTo(ctx, counter, "COPY "+table+" TO STDOUT (FORMAT binary)")
	if err != nil {
		return Result{}, fmt.Errorf("copying %s: %w", table, err)
	}
	return Result{
		Name: "limit 1: COPY binary to nowhere", Rows: tag.RowsAffected(), Bytes: counter.n,
		Elapsed: time.Since(start),
	}, nil
}

// RecvLogicalLimit measures limit 2: pg_recvlogical with pgoutput decoding the WAL a workload
// writes, from a slot created before the workload to the WAL end after it. rows is the number of
// row changes the workload makes.
func RecvLogicalLimit(ctx context.Context, conn *pgx.Conn, binDir, dsn, name string, rows int64,
	workload func(context.Context) error) (Result, error) {
	slot := "bench_limit_" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		return Result{}, fmt.Errorf("creating slot %s: %w", slot, err)
	}
	defer func() {
		_, _ = conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", slot)
	}()
	if err := workload(ctx); err != nil {
		return Result{}, fmt.Errorf("running workload %s: %w", name, err)
	}
	var end string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&end); err != nil {
		return Result{}, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "pg_recvlogical"),
		"-d", dsn, "--slot", slot, "--start", "--endpos", end, "--no-loop",
		"-o", "proto_version=1", "-o", "publication_names=bench_pub", "-f", "/dev/null")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return Result{}, fmt.Errorf("pg_recvlogical: %w: %s", err, out)
	}
	return Result{Name: "limit 2: pg_recvlogical, " + name, Rows: rows, Elapsed: time.Since(start)}, nil
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)
