// Command webuishot takes the screenshot of the Temporal Web UI that docs/operations.md shows: a
// TableWorkflow's page with its summary, current details and activity summaries. Against the
// PostgreSQL and Temporal dev server of cmd/devstack, it seeds a table in its own database, runs
// a worker and a pipeline into a local Iceberg warehouse (in a temporary directory), waits for
// the backfill and a few streamed commits, captures the page with headless Chromium, then tears
// the pipeline down (its slot dropped). Run it through scripts/screenshot-webui.sh, which
// installs Chromium.
//
//	go run ./cmd/webuishot [-out docs/webui-table-workflow.png]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/workflows"
)

const (
	pipelineName = "webui"
	database     = "sluice_webui"
	seedRows     = 20_000
)

func main() {
	out := flag.String("out", "docs/webui-table-workflow.png", "the PNG to write")
	browser := flag.String("chromium", "chromium", "the headless Chromium binary")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *out, *browser); err != nil {
		fmt.Fprintln(os.Stderr, "webuishot:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func run(ctx context.Context, out, browser string) error {
	if _, err := exec.LookPath(browser); err != nil {
		return fmt.Errorf("%s not found (scripts/screenshot-webui.sh installs Debian's chromium): %w", browser, err)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	stack, err := devstack.New("", "", slog.Default())
	if err != nil {
		return err
	}
	infos, err := stack.EnsureEach(ctx, devstack.ServicePostgres, devstack.ServiceTemporal)
	if err != nil {
		return err
	}
	pg, temporal := infos[0], infos[1]
	ui := temporal.Extra["ui"]
	dir, err := os.MkdirTemp("", "sluice-webuishot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	step("seeding public.orders (%d rows) in database %s", seedRows, database)
	dsn, err := seed(ctx, pg.URL)
	if err != nil {
		return err
	}
	configPath := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(configPath, []byte(pipelineConfig(dsn, temporal.Addr, dir)), 0o600); err != nil {
		return err
	}
	tc, err := client.DialContext(ctx, client.Options{HostPort: temporal.Addr, Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return fmt.Errorf("connecting to Temporal: %w", err)
	}
	defer tc.Close()
	table := batch.TableName{Schema: "public", Name: "orders"}
	tableID := workflows.TableWorkflowID(pipelineName, table)
	for _, id := range []string{workflows.SourceWorkflowID(pipelineName), tableID} {
		_ = tc.TerminateWorkflow(ctx, id, "", "a new screenshot run starts")
	}

	step("building the worker and the starter")
	bins, err := localrun.Build(ctx, root, filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	w, err := localrun.StartWorker(bins.Worker, configPath, filepath.Join(dir, "worker.log"), nil)
	if err != nil {
		return err
	}
	defer w.Stop()
	sluice := func(args ...string) error {
		o, err := localrun.Sluice(ctx, bins.Starter, nil, append(args, "--config", configPath)...)
		fmt.Print(o)
		return err
	}
	defer func() {
		step("tearing the pipeline down")
		_ = sluice("teardown", "--yes")
	}()
	if err := sluice("start"); err != nil {
		return err
	}
	started := time.Now().Add(-time.Second)
	err = localrun.WaitFor(ctx, "the backfill of public.orders", 3*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		st, err := localrun.TableStatus(ctx, tc, pipelineName, table, started)
		return err == nil && st.Phase == workflows.StateStream && st.HasPosition, fmt.Sprintf("%+v", st), nil
	})
	if err != nil {
		return err
	}

	step("streaming inserts, updates and deletes")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// One statement at a time, each committed before the next, so the page shows several commits.
	var rows int64
	for i, q := range []string{
		`INSERT INTO public.orders (id, customer, amount, status) SELECT g, 'customer-' || (g % 500), g % 1000, 'new' FROM generate_series(20001, 20311) g`,
		`UPDATE public.orders SET status = 'paid' WHERE id % 50 = 0`,
		`DELETE FROM public.orders WHERE id % 97 = 0`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("statement %d: %w", i+1, err)
		}
		err = localrun.WaitFor(ctx, fmt.Sprintf("statement %d's commit", i+1), 2*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, tc, pipelineName, table, started)
			if err != nil || st.Rows <= rows || st.QueueLength > 0 {
				return false, fmt.Sprintf("%+v", st), nil
			}
			rows = st.Rows
			return true, "", nil
		})
		if err != nil {
			return err
		}
	}

	// A running workflow's page polls Temporal without end, so headless Chromium's virtual time
	// never settles on it: stop the pipeline first and capture the closed run's page while the
	// worker still runs, which answers the Web UI's metadata query (the current details) by
	// replaying the run.
	desc, err := tc.DescribeWorkflowExecution(ctx, tableID, "")
	if err != nil {
		return err
	}
	if err := sluice("stop"); err != nil {
		return err
	}
	page := fmt.Sprintf("%s/namespaces/default/workflows/%s/%s/user-metadata", ui, url.PathEscape(tableID), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	step("capturing %s", page)
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--window-size=1440,1100", "--virtual-time-budget=15000", "--screenshot="+abs, page)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", browser, err, o)
	}
	step("wrote %s", out)
	return nil
}

// seed makes database anew with public.orders and its rows, and returns its DSN.
func seed(ctx context.Context, adminDSN string) (string, error) {
	dsn, err := devstack.FreshDatabase(ctx, adminDSN, database)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, fmt.Sprintf(`
CREATE TABLE public.orders (
	id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2) NOT NULL, status text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now());
INSERT INTO public.orders (id, customer, amount, status)
SELECT g, 'customer-' || (g %% 500), round((g * 7.31)::numeric %% 1000, 2), (ARRAY['new','paid','shipped'])[1 + g %% 3]
FROM generate_series(1, %d) g`, seedRows))
	if err != nil {
		return "", fmt.Errorf("seeding public.orders: %w", err)
	}
	return dsn, nil
}

// pipelineConfig is the pipeline: public.orders into a local Iceberg warehouse under dir.
func pipelineConfig(dsn, temporalAddr, dir string) string {
	return fmt.Sprintf(`pipeline: %s
source:
  dsn: %s
temporal:
  address: %s
staging:
  url: %s
batch:
  max_wait: 500ms
sink:
  type: iceberg
  iceberg:
    catalog:
      type: sql
      dialect: sqlite
      uri: %s
      name: webui
    warehouse: %s
tables:
  - source: public.orders
    target: raw.orders
`, pipelineName, dsn, temporalAddr, filepath.Join(dir, "staging"), filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
}
