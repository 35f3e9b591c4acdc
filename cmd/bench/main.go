// Command bench measures Sluice's backfill and stream against the limits of the PostgreSQL it
// reads from, in one run, prints one table and writes docs/benchmarks.md. It is separate from the
// tests: `make bench`.
//
// Limit 1 is COPY binary to nowhere; limit 2 is pg_recvlogical (pgoutput) consuming a bulk
// UPDATE and many single-row transactions. Then, per sink (--sinks), a pipeline with its own
// name, slot and task queue backfills public.orders, consumes the same two workloads from its
// slot's backlog, and inserts at a fixed rate into public.bench_latency while the sink is polled
// for the rows (end-to-end latency). The worker's peak RSS (VmHWM) is read per phase: a fresh
// worker process runs each one.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/sluicecdc/sluice/internal/bench"
	"github.com/sluicecdc/sluice/internal/devstack"
	"github.com/sluicecdc/sluice/internal/localrun"
)

type options struct {
	rows, bulk, smallTx, chunkRows, rate int
	parallelism                          int
	memoryRows, memoryTx                 int
	sinks, memorySinks                   []string
	skipSluice, skipStream, skipLatency  bool
	skipMemory                           bool
	profileDir, bins                     string
	latencyFor, maxWait                  time.Duration
	out                                  string
}

func main() {
	var o options
	var sinks, memorySinks string
	flag.IntVar(&o.rows, "rows", 2_000_000, "rows of the benchmark table (the bulk UPDATE changes a quarter of them)")
	flag.IntVar(&o.bulk, "bulk", 0, "rows of the bulk UPDATE transaction, at most --rows (0: rows/4)")
	flag.IntVar(&o.smallTx, "small-tx", 0, "single-row transactions of the stream workload (0: rows/5)")
	flag.IntVar(&o.chunkRows, "chunk-rows", 100_000, "source.snapshot_chunk_rows of the benchmark pipelines")
	flag.IntVar(&o.parallelism, "parallelism", 0, "source.snapshot_parallelism of the benchmark pipelines (0: the key is left out, the worker's default)")
	flag.IntVar(&o.rate, "rate", bench.GoalLatencyRate, "rows/s of the latency run")
	flag.DurationVar(&o.latencyFor, "latency-for", 20*time.Second, "how long the latency run inserts")
	flag.DurationVar(&o.maxWait, "max-wait", time.Second, "batch.max_wait of the benchmark pipelines (the flush interval)")
	flag.StringVar(&sinks, "sinks", "iceberg,clickhouse,couchbase", "sinks to measure, comma-separated")
	flag.IntVar(&o.memoryRows, "memory-rows", 10_000_000, "rows of the memory case's backfill (public.orders is refilled with them after the throughput runs)")
	flag.IntVar(&o.memoryTx, "memory-tx", 1_000_000, "rows of the memory case's single transaction, at most --memory-rows")
	flag.StringVar(&memorySinks, "memory-sinks", "iceberg,clickhouse", "sinks of the memory cases, comma-separated (gocaves keeps every document in its own memory: add couchbase with care)")
	flag.BoolVar(&o.skipMemory, "skip-memory", false, "leave out the memory cases")
	flag.BoolVar(&o.skipSluice, "skip-sluice", false, "measure only Postgres' limits")
	flag.BoolVar(&o.skipStream, "skip-stream", false, "leave out the stream workloads (and their limits): backfill and latency only")
	flag.BoolVar(&o.skipLatency, "skip-latency", false, "leave out the latency run")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write a CPU profile of each worker process into this directory")
	flag.StringVar(&o.bins, "bins", "", "use the sluice-worker and sluice binaries in this directory instead of building them (to compare builds)")
	flag.StringVar(&o.out, "out", "docs/benchmarks.md", "where to write the report (empty: do not write)")
	flag.Parse()
	if o.bulk <= 0 || o.bulk > o.rows {
		o.bulk = o.rows / 4
	}
	if o.smallTx <= 0 {
		o.smallTx = o.rows / 5
	}
	if o.memoryTx <= 0 || o.memoryTx > o.memoryRows {
		o.memoryTx = min(1_000_000, o.memoryRows)
	}
	o.sinks, o.memorySinks = splitList(sinks), splitList(memorySinks)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// splitList splits a comma-separated flag value, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func run(ctx context.Context, o options) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	stack, err := devstack.New("", "", log)
	if err != nil {
		return err
	}
	pg, err := stack.Ensure(ctx, devstack.ServicePostgres)
	if err != nil {
		return err
	}
	dsn, err := devstack.FreshDatabase(ctx, pg.URL, "sluice_bench")
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting to the benchmark database: %w", err)
	}
	defer conn.Close(context.Background())

	report := bench.Report{Date: time.Now().UTC(), Machine: bench.Machine(), Rows: o.rows}
	log.Info("creating public.orders", "rows", o.rows)
	if err := bench.CreateOrders(ctx, conn, o.rows); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE PUBLICATION bench_pub FOR TABLE public.orders"); err != nil {
		return fmt.Errorf("creating publication: %w", err)
	}
	limit1, err := bench.CopyBinaryLimit(ctx, conn, "public.orders")
	if err != nil {
		return err
	}
	report.Results = append(report.Results, limit1)

	bulk := o.bulk
	so := bench.SinkOptions{Rows: o.rows, Bulk: bulk, SmallTx: o.smallTx, PgBin: pg.Extra["bin"], DSN: dsn,
		ChunkRows: o.chunkRows, Rate: o.rate, LatencyFor: o.latencyFor, CopyBytes: limit1.Bytes,
		Limit1: limit1.Name, SkipStream: o.skipStream, SkipLatency: o.skipLatency}
	if !o.skipStream {
		if err := measureStreamLimits(ctx, conn, pg.Extra["bin"], dsn, o, &so, &report); err != nil {
			return err
		}
	}
	var failures []string
	if !o.skipSluice {
		results, errs, err := measureSluice(ctx, stack, dsn, conn, o, so, log)
		if err != nil {
			return err
		}
		report.Results = append(report.Results, results...)
		failures = errs
	}
	return writeReport(report, o, failures)
}

// measureStreamLimits measures limit 2 for both stream workloads and names them in so.
func measureStreamLimits(ctx context.Context, conn *pgx.Conn, pgBin, dsn string, o options, so *bench.SinkOptions, report *bench.Report) error {
	bulk := o.bulk
	limitBulk, err := bench.RecvLogicalLimit(ctx, conn, pgBin, dsn, "bulk UPDATE in one transaction", int64(bulk),
		bench.BulkUpdate(conn, bulk))
	if err != nil {
		return err
	}
	report.Results = append(report.Results, limitBulk)
	limitSmall, err := bench.RecvLogicalLimit(ctx, conn, pgBin, dsn, "single-row UPDATE transactions", int64(o.smallTx),
		bench.SmallTransactions(pgBin, dsn, o.smallTx, o.rows))
	if err != nil {
		return err
	}
	limitSmall.Note = "4 pgbench clients"
	report.Results = append(report.Results, limitSmall)
	so.LimitBulk, so.LimitSmall = limitBulk.Name, limitSmall.Name
	return nil
}

// measureSluice builds the binaries and measures each sink in turn; a sink that fails is
// reported and the others still run.
func measureSluice(ctx context.Context, stack *devstack.Stack, dsn string, conn *pgx.Conn, o options, so bench.SinkOptions,
	log *slog.Logger) ([]bench.Result, []string, error) {
	temporal, err := stack.Ensure(ctx, devstack.ServiceTemporal)
	if err != nil {
		return nil, nil, err
	}
	root := filepath.Dir(stack.Dir)
	work := filepath.Join(stack.Dir, "bench")
	if err := os.RemoveAll(work); err != nil {
		return nil, nil, err
	}
	bins := localrun.Binaries{Worker: filepath.Join(o.bins, "sluice-worker"), Starter: filepath.Join(o.bins, "sluice")}
	if o.bins == "" {
		log.Info("building the worker and the starter")
		if bins, err = localrun.Build(ctx, root, filepath.Join(work, "bin")); err != nil {
			return nil, nil, err
		}
	}
	tc, err := client.DialContext(ctx, client.Options{HostPort: temporal.Addr,
		Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to Temporal at %s: %w", temporal.Addr, err)
	}
	defer tc.Close()
	var out []bench.Result
	var failures []string
	// each runs measure on every sink of kinds, a pipeline of its own under work/<kind><suffix>;
	// a sink that fails is reported and the others still run.
	each := func(kinds []string, suffix, what string,
		measure func(p *bench.Pipeline, t bench.SinkTarget) ([]bench.Result, error)) error {
		for _, kind := range kinds {
			dir := filepath.Join(work, kind+suffix)
			target, err := sinkTarget(ctx, stack, kind, dir)
			if err != nil {
				return err
			}
			p, err := bench.NewPipeline(bench.PipelineSpec{Name: "bench-" + kind, Dir: dir, SourceDSN: dsn, TemporalAddr: temporal.Addr,
				SinkYAML: target.SinkYAML, OrdersTarget: target.OrdersTarget, LatencyTarget: target.LatencyTarget,
				SnapshotChunkRows: o.chunkRows, SnapshotParallelism: o.parallelism, MaxWait: o.maxWait, ProfileDir: o.profileDir}, bins, tc)
			if err != nil {
				return err
			}
			res, err := measure(p, target)
			out = append(out, res...)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				log.Error(what+" failed", "sink", kind, "err", err, "worker logs", dir)
				failures = append(failures, fmt.Sprintf("%s (%s): %v", kind, what, err))
			}
		}
		return nil
	}
	if err := each(o.sinks, "", "throughput", func(p *bench.Pipeline, t bench.SinkTarget) ([]bench.Result, error) {
		return bench.MeasureSink(ctx, conn, p, t, so, log)
	}); err != nil {
		return out, failures, err
	}
	if o.skipMemory || len(o.memorySinks) == 0 {
		return out, failures, nil
	}
	log.Info("memory cases: refilling public.orders", "rows", o.memoryRows)
	if err := bench.CreateOrders(ctx, conn, o.memoryRows); err != nil {
		return out, failures, err
	}
	mo := bench.MemoryOptions{Rows: o.memoryRows, Tx: o.memoryTx, ChunkRows: o.chunkRows}
	err = each(o.memorySinks, "-memory", "memory cases", func(p *bench.Pipeline, t bench.SinkTarget) ([]bench.Result, error) {
		return bench.MeasureMemory(ctx, conn, p, t, mo, log)
	})
	return out, failures, err
}

// sinkTarget starts the sink's service when it has one and describes where the run writes.
func sinkTarget(ctx context.Context, stack *devstack.Stack, kind, dir string) (bench.SinkTarget, error) {
	switch kind {
	case "iceberg":
		return bench.IcebergTarget(dir), nil
	case "clickhouse":
		ch, err := stack.Ensure(ctx, devstack.ServiceClickHouse)
		if err != nil {
			return bench.SinkTarget{}, err
		}
		return bench.ClickHouseTarget(ch.Addr, "sluice_bench"), nil
	case "couchbase":
		cb, err := stack.Ensure(ctx, devstack.ServiceCouchbase)
		if err != nil {
			return bench.SinkTarget{}, err
		}
		scope := fmt.Sprintf("bench%d", time.Now().Unix())
		return bench.CouchbaseTarget(cb.URL, cb.Extra["username"], cb.Extra["password"], cb.Extra["bucket"], scope), nil
	}
	return bench.SinkTarget{}, fmt.Errorf("--sinks: unknown sink %q; use iceberg, clickhouse or couchbase", kind)
}

func writeReport(report bench.Report, o options, failures []string) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Benchmarks\n\nMeasured %s on %s, with a %d-row, 7-column table (`make bench`, flags: --rows %d --bulk %d --small-tx %d --chunk-rows %d --rate %d --latency-for %s --max-wait %s --memory-rows %d --memory-tx %d --memory-sinks %s).\n\n",
		report.Date.Format("2006-01-02 15:04 MST"), report.Machine, o.rows, o.rows, o.bulk, o.smallTx, o.chunkRows, o.rate, o.latencyFor, o.maxWait,
		o.memoryRows, o.memoryTx, strings.Join(o.memorySinks, ","))
	report.WriteTable(&buf)
	if !o.skipSluice {
		fmt.Fprintf(&buf, "\n## Goals (issue 9)\n\n")
		bench.WriteChecks(&buf, report.Checks(o.maxWait))
		for _, f := range failures {
			fmt.Fprintf(&buf, "\nA sink failed during the run: %s\n", f)
		}
		fmt.Fprint(&buf, methodNotes)
	}
	if o.out != "" {
		buf.WriteString(keptSection(o.out, beforeAfterHeading))
	}
	os.Stdout.Write(buf.Bytes())
	if o.out != "" {
		if err := os.WriteFile(o.out, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", o.out, err)
		}
	}
	return nil
}

// beforeAfterHeading starts the hand-written section of the report that names each performance
// fix and its measured gain; a new run keeps it.
const beforeAfterHeading = "## Before and after"

// keptSection returns the section of the report at path that starts with heading, up to the
// next second-level heading, or "" when there is none.
func keptSection(path, heading string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	text := string(old)
	i := strings.Index(text, "\n"+heading)
	if i < 0 {
		return ""
	}
	section := text[i:]
	if j := strings.Index(section[len(heading)+1:], "\n## "); j >= 0 {
		section = section[:len(heading)+1+j]
	}
	return strings.TrimRight(section, "\n") + "\n"
}

const methodNotes = `
## How the figures are taken

- **Limits** are measured first in the same run: limit 1 copies public.orders with COPY (FORMAT
  binary) to nowhere; limit 2 runs pg_recvlogical (pgoutput) from a slot created before the
  workload to the WAL end after it, started once the workload has committed.
- **Pipelines.** Each sink gets its own pipeline (bench-<sink>: its own slot, publication and task
  queue) over the same public.orders and public.bench_latency, one sink after the other, with
  batch.max_rows 100000, batch.max_bytes 64MiB and the batch.max_wait above.
- **Backfill** runs from sluice start until the orders table's workflow reports phase stream with
  a committed position (status query, polled every 100 ms). MB/s counts limit 1's COPY bytes.
- **Stream.** Like limit 2, each workload runs while the pipeline is stopped (sluice stop, worker
  stopped), followed by a one-row marker transaction whose pre-commit WAL position is recorded.
  A fresh worker starts, then sluice start; the figure runs until the table's committed position
  reaches the marker (positions advance only by committed batches, in commit order). The figure
  therefore includes the restart: the "restart" row is that fixed cost with no workload.
- **Latency.** With the pipeline streaming, one connection inserts into public.bench_latency at
  the asked rate (a transaction every 10 ms, ids increasing). The sink is polled every 100 ms for
  the largest id visible (ClickHouse max(id), an Iceberg scan of new ids when the table's metadata
  changed, Couchbase gets that gallop and bisect over the ids); a row's latency is the end of the
  first poll that sees it minus the moment its COMMIT returned to the client.
- **Caching.** Limit 1 runs right after the table is created and vacuumed, so its pages are in
  memory (hence a faster COPY than ENVIRONMENT.md's 350k rows/s); so are they for the backfills.
  Each sink's backfill reads public.orders after the earlier sinks' stream workloads (vacuumed
  before each backfill).
- **Memory** is the worker process's VmHWM: each phase runs in a fresh worker process. The
  memory cases run last: public.orders is refilled with --memory-rows rows, each memory sink
  backfills it (from sluice start to phase stream), then one UPDATE of --memory-tx rows in a
  single transaction is consumed from the backlog by a fresh worker, as the stream figures are.
  Workers run with their default --memory-limit (auto: without GOMEMLIMIT or a container limit,
  seven batches of batch.max_bytes, 448 MiB here).
- The machine is shared (other builds and test runs use the same 2 cores); figures are noisy.
  Couchbase is gocaves, Couchbase's in-memory mock (no real server installs here), and
  ClickHouse is 18.16: their figures say more about these stand-ins than about the sinks.
`
