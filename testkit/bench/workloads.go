package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// BulkUpdate updates the first n rows of public.orders in one transaction.
func BulkUpdate(conn *pgx.Conn, n int) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := conn.Exec(ctx, "UPDATE public.orders SET status = status || '!', updated_at = updated_at + interval '1 second' WHERE id <= $1", n)
		return err
	}
}

// SmallTransactions runs n single-row UPDATE transactions with pgbench (4 clients), each on a
// random key of public.orders (1..rows).
func SmallTransactions(binDir, dsn string, n, rows int) func(context.Context) error {
	return func(ctx context.Context) error {
		f, err := os.CreateTemp("", "sluice-bench-small-tx-*.sql") // a run of its own: runs may share a machine
		if err != nil {
			return fmt.Errorf("writing the pgbench script: %w", err)
		}
		defer os.Remove(f.Name())
		body := fmt.Sprintf("\\set id random(1, %d)\nUPDATE public.orders SET updated_at = updated_at + interval '1 second' WHERE id = :id;\n", rows)
		if _, err := f.WriteString(body); err != nil {
			f.Close()
			return fmt.Errorf("writing the pgbench script: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("writing the pgbench script: %w", err)
		}
		script := f.Name()
		const clients = 4
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "pgbench"), "-n", "-c", strconv.Itoa(clients), "-j", "2",
			"-t", strconv.Itoa(n/clients), "-f", script, dsn)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("pgbench: %w: %s", err, out)
		}
		return nil
	}
}
