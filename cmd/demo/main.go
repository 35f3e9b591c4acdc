// Command demo runs Sluice's embedded default on one machine: against the PostgreSQL and
// Temporal dev server that cmd/devstack starts, it seeds a sample table, runs a worker, starts
// the pipeline of examples/demo.yaml with the starter CLI, waits for the backfill, applies live
// inserts, updates, deletes and a key change, waits until the Iceberg table equals the source key
// by key, and prints the table as Iceberg returns it with the pipeline's status.
//
// Every run starts clean: the demo database, its slot, the local warehouse and staging are made
// anew. The stack stays up afterwards so the Web UI keeps the history; `make stop` stops it.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/localrun"
)

const (
	configPath = "examples/demo.yaml"
	seedRows   = 10_000
)

var columns = []string{"customer", "amount", "status"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func run(ctx context.Context) error {
	stack, err := devstack.New("", "", slog.Default())
	if err != nil {
		return err
	}
	infos, err := stack.EnsureEach(ctx, devstack.ServicePostgres, devstack.ServiceTemporal)
	if err != nil {
		return err
	}
	pg, temporal := infos[0], infos[1]
	root := filepath.Dir(stack.Dir)
	if err := os.Chdir(root); err != nil {
		return err
	}
	demoDir := filepath.Join(stack.Dir, "demo")
	// A worker left by an earlier demo that did not end cleanly (killed, or its output pipe
	// closed) would take this demo's tasks with a sink cache of the old warehouse.
	stopStaleWorker(filepath.Join(demoDir, "worker.pid"))
	if err := os.RemoveAll(demoDir); err != nil {
		return fmt.Errorf("cleaning %s: %w", demoDir, err)
	}
	if err := os.MkdirAll(demoDir, 0o755); err != nil {
		return err
	}

	step("seeding public.orders with %d rows in the demo database", seedRows)
	dsn, err := seed(ctx, pg.URL, seedRows)
	if err != nil {
		return err
	}
	env := []string{"SLUICE_SOURCE_DSN=" + dsn, "SLUICE_TEMPORAL_ADDRESS=" + temporal.Addr}
	for _, e := range env {
		k, v, _ := cutEnv(e)
		os.Setenv(k, v)
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		return err
	}
	tc, err := client.DialContext(ctx, client.Options{HostPort: temporal.Addr,
		Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return fmt.Errorf("connecting to Temporal: %w", err)
	}
	defer tc.Close()
	// A previous demo's workflows would keep running against the old database.
	for _, id := range []string{"sluice/demo/source", "sluice/demo/public.orders"} {
		_ = tc.TerminateWorkflow(ctx, id, "", "a new demo starts")
	}

	step("building the worker and the starter CLI")
	bins, err := localrun.Build(ctx, root, filepath.Join(demoDir, "bin"))
	if err != nil {
		return err
	}
	step("starting a worker (log %s)", filepath.Join(demoDir, "worker.log"))
	w, err := localrun.StartWorker(bins.Worker, configPath, filepath.Join(demoDir, "worker.log"), env)
	if err != nil {
		return err
	}
	defer w.Stop()
	if err := os.WriteFile(filepath.Join(demoDir, "worker.pid"), []byte(strconv.Itoa(w.PID())), 0o644); err != nil {
		return err
	}

	step("sluice start --config %s", configPath)
	out, err := localrun.Sluice(ctx, bins.Starter, env, "start", "--config", configPath)
	fmt.Print(out)
	if err != nil {
		return err
	}
	table := batch.TableName{Schema: "public", Name: "orders"}
	started := time.Now().Add(-time.Second)
	step("waiting for the backfill")
	err = localrun.WaitFor(ctx, "the backfill of public.orders", 3*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		st, err := localrun.TableStatus(ctx, tc, cfg.Pipeline, table, started)
		if err != nil {
			return false, "", err
		}
		return st.Phase == "stream" && st.HasPosition, fmt.Sprintf("phase %s, %d rows", st.Phase, st.Rows), nil
	})
	if err != nil {
		return err
	}

	step("applying live changes: 200 inserts, 300 updates, 100 deletes, 1 primary-key change")
	if err := liveChanges(ctx, dsn); err != nil {
		return err
	}
	step("waiting until the Iceberg table equals the source key by key")
	var sink localrun.Table
	err = localrun.WaitFor(ctx, "Iceberg to equal the source", 2*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		src, err := localrun.ScanPostgres(ctx, dsn, "public.orders", "id", columns)
		if err != nil {
			return false, "", err
		}
		if sink, err = localrun.ScanIceberg(ctx, cfg, "raw.orders", "id", append([]string{"id"}, columns...)); err != nil {
			return false, "", err
		}
		sinkRows := localrun.Table{Columns: columns, Rows: map[string][]string{}}
		for k, r := range sink.Rows {
			sinkRows.Rows[k] = r[1:]
		}
		diff := localrun.Diff(src, sinkRows, 3)
		return len(diff) == 0, fmt.Sprintf("%d differences, e.g. %v", len(diff), diff), nil
	})
	if err != nil {
		return err
	}
	printTable(sink, 12)
	step("sluice status --config %s", configPath)
	out, err = localrun.Sluice(ctx, bins.Starter, env, "status", "--config", configPath)
	fmt.Print(out)
	if err != nil {
		return err
	}
	fmt.Printf("\nIceberg warehouse: %s (sqlite catalog %s)\n", cfg.Sink.Iceberg.Warehouse, cfg.Sink.Iceberg.Catalog.URI)
	fmt.Printf("Temporal Web UI:   %s/namespaces/default/workflows?query=SluicePipeline%%3D%%22demo%%22\n", temporal.Extra["ui"])
	fmt.Println("The worker stops now; the workflows and their history stay in the Web UI. Stop the stack with: make stop")
	return nil
}

func cutEnv(e string) (string, string, bool) {
	for i := range e {
		if e[i] == '=' {
			return e[:i], e[i+1:], true
		}
	}
	return e, "", false
}

// seed recreates the demo database with public.orders holding n rows and returns its DSN.
func seed(ctx context.Context, adminDSN string, n int) (string, error) {
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer admin.Close(context.Background())
	_, _ = admin.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = 'demo' AND active_pid IS NOT NULL`)
	_, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = 'demo'`)
	for _, q := range []string{"DROP DATABASE IF EXISTS demo WITH (FORCE)", "CREATE DATABASE demo"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
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
	_, err = conn.Exec(ctx, fmt.Sprintf(`
CREATE TABLE public.orders (
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
FROM generate_series(1, %d) g;`, n))
	if err != nil {
		return "", fmt.Errorf("seeding public.orders: %w", err)
	}
	return u.String(), nil
}

// liveChanges writes while the pipeline streams: inserts, updates, deletes and a key change.
func liveChanges(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO public.orders (id, customer, amount, status)
			SELECT g, 'live-' || g, g %% 100 + 0.99, 'new' FROM generate_series(%d, %d) g`, seedRows+1, seedRows+200),
		`UPDATE public.orders SET status = 'shipped', amount = amount + 1 WHERE id % 33 = 0`,
		`DELETE FROM public.orders WHERE id BETWEEN 5001 AND 5100`,
		`UPDATE public.orders SET id = 99999, customer = 'renamed key' WHERE id = 42`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("live change %q: %w", q, err)
		}
	}
	return nil
}

func printTable(t localrun.Table, n int) {
	keys := make([]int, 0, len(t.Rows))
	for k := range t.Rows {
		id, _ := strconv.Atoi(k)
		keys = append(keys, id)
	}
	sort.Ints(keys)
	fmt.Printf("\nraw.orders as Iceberg returns it (%d rows; first and last %d):\n", len(keys), n/2)
	fmt.Printf("%-8s %-16s %-10s %-10s\n", "id", "customer", "amount", "status")
	for i, k := range keys {
		if i == n/2 && len(keys) > n {
			fmt.Println("...")
		}
		if i >= n/2 && i < len(keys)-n/2 {
			continue
		}
		r := t.Rows[strconv.Itoa(k)]
		fmt.Printf("%-8s %-16s %-10s %-10s\n", r[0], r[1], r[2], r[3])
	}
	fmt.Println()
}

// stopStaleWorker kills the demo worker whose pid an earlier demo recorded in pidFile, if that
// process still runs and is a sluice-worker.
func stopStaleWorker(pidFile string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), "sluice-worker") {
		return
	}
	step("stopping the worker an earlier demo left running (pid %d)", pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 50 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
}
