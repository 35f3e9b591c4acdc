// Command bench measures Sluice's backfill and stream against the limits of the PostgreSQL it
// reads from and against what a user would load by hand, in one run, checks issue 21's goals,
// prints one report and writes docs/benchmarks.md. It is separate from the tests: `make bench`.
//
// Limit 1 is COPY binary to nowhere; limit 2 is pg_recvlogical (pgoutput) consuming a bulk
// UPDATE and many single-row transactions. The baselines are psql's COPY piped into
// clickhouse-client, and arrow-go writing the rows as Parquet. Then, per sink (--sinks), a
// pipeline with its own name, slot and task queue backfills public.orders, consumes the same two
// workloads from its slot's backlog, and inserts at a fixed rate into public.bench_latency while
// the sink is polled for the rows (end-to-end latency); --scaling backfills again at
// snapshot_parallelism 1, 2 and 4; the memory cases backfill a larger table and stream one large
// transaction. A fresh worker process runs each phase: its peak RSS (VmHWM), its CPU profile and
// its heap profile near that peak are the phase's, and each missed goal is reported with the top
// of its profile and a place for its causes, written by hand and kept by the next run.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/testkit/bench"
	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/localrun"
)

type options struct {
	rows, bulk, smallTx, chunkRows, rate int
	parallelism                          int
	memoryRows, memoryTx                 int
	sinks, memorySinks                   []string
	skipSluice, skipStream, skipLatency  bool
	skipMemory, skipBaselines, scaling   bool
	profileDir, bins, name               string
	latencyFor, maxWait                  time.Duration
	out                                  string
}

// validName is what --name may be: it becomes a database, slot and directory name.
var validName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

// scalingParallelism are the snapshot_parallelism values of --scaling.
func scalingParallelism() []int { return []int{1, 2, 4} }

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
	flag.StringVar(&sinks, "sinks", "iceberg,clickhouse", "sinks to measure, comma-separated (couchbase has no goal: add it by hand; gocaves takes about 20 minutes)")
	flag.IntVar(&o.memoryRows, "memory-rows", 10_000_000, "rows of the memory case's backfill (public.orders is refilled with them after the throughput runs)")
	flag.IntVar(&o.memoryTx, "memory-tx", 1_000_000, "rows of the memory case's single transaction, at most --memory-rows")
	flag.StringVar(&memorySinks, "memory-sinks", "iceberg,clickhouse", "sinks of the memory cases, comma-separated (gocaves keeps every document in its own memory: add couchbase with care)")
	flag.BoolVar(&o.skipMemory, "skip-memory", false, "leave out the memory cases")
	flag.BoolVar(&o.skipSluice, "skip-sluice", false, "measure only Postgres' limits")
	flag.BoolVar(&o.skipStream, "skip-stream", false, "leave out the stream workloads (and their limits): backfill and latency only")
	flag.BoolVar(&o.skipLatency, "skip-latency", false, "leave out the latency run")
	flag.StringVar(&o.profileDir, "profile-dir", bench.ProfileDirAuto, "where each worker's CPU profile and its heap profile near its peak RSS go: auto (a fresh directory under the stack directory, never in the repository), off, or a directory")
	flag.BoolVar(&o.scaling, "scaling", false, "also backfill each sink at snapshot_parallelism 1, 2 and 4 (about 6 more backfills of --rows rows)")
	flag.BoolVar(&o.skipBaselines, "skip-baselines", false, "leave out the hand-made loads (psql | clickhouse-client, arrow-go Parquet) Sluice's backfill is compared with")
	flag.StringVar(&o.bins, "bins", "", "use the sluice-worker and sluice binaries in this directory instead of building them (to compare builds)")
	flag.StringVar(&o.name, "name", "bench", "name of the run's database (sluice_NAME), pipelines (NAME-<sink>), ClickHouse database and stack directory: another name lets two runs share one stack")
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
	if !validName.MatchString(o.name) {
		fmt.Fprintf(os.Stderr, "bench: --name %q: use lowercase letters, digits and underscores, starting with a letter\n", o.name)
		os.Exit(2)
	}
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
	dsn, err := devstack.FreshDatabase(ctx, pg.URL, "sluice_"+o.name)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting to the benchmark database: %w", err)
	}
	defer conn.Close(context.Background())

	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if o.profileDir, err = bench.ProfileDir(o.profileDir, filepath.Join(stack.Dir, o.name+"-profiles"), root, os.TempDir(), time.Now()); err != nil {
		return err
	}
	report := bench.Report{Date: time.Now().UTC(), Machine: bench.Machine(), Rows: o.rows, Bulk: o.bulk, SmallTx: o.smallTx,
		MemoryRows: o.memoryRows, Sinks: o.sinks}
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
	if !o.skipBaselines {
		baselines, err := measureBaselines(ctx, stack, conn, pg.Extra["bin"], dsn, o, limit1, log)
		if err != nil {
			return err
		}
		report.Results = append(report.Results, baselines...)
	}

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
		results, errs, err := measureSluice(ctx, stack, root, dsn, conn, o, so, log)
		if err != nil {
			return err
		}
		report.Results = append(report.Results, results...)
		failures = errs
	}
	return writeReport(ctx, report, o, failures)
}

// moduleRoot is the root of the Sluice module holding the working directory (make bench runs
// there), where the worker and the starter are built from.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod in %s or above: run the benchmark from the Sluice repository", dir)
		}
	}
}

// measureBaselines measures the hand-made loads of the run's sinks that have one.
func measureBaselines(ctx context.Context, stack *devstack.Stack, conn *pgx.Conn, pgBin, dsn string, o options, limit1 bench.Result,
	log *slog.Logger) ([]bench.Result, error) {
	var out []bench.Result
	if slices.Contains(o.sinks, "clickhouse") {
		ch, err := stack.Ensure(ctx, devstack.ServiceClickHouse)
		if err != nil {
			return nil, err
		}
		host, port, err := net.SplitHostPort(ch.Addr)
		if err != nil {
			return nil, fmt.Errorf("ClickHouse address %s: %w", ch.Addr, err)
		}
		client, err := exec.LookPath("clickhouse-client")
		if err != nil {
			return nil, fmt.Errorf("the ClickHouse baseline needs clickhouse-client (--skip-baselines to leave it out): %w", err)
		}
		local, _ := exec.LookPath("clickhouse-local")
		log.Info("baseline: psql | clickhouse-client")
		r, err := bench.ClickHouseBaseline(ctx, bench.ClickHouseBaselineOptions{Psql: filepath.Join(pgBin, "psql"), DSN: dsn,
			Client: client, Local: local, Host: host, Port: port, Database: "sluice_" + o.name + "_baseline", Rows: limit1.Rows, Limit1: limit1.Name})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if slices.Contains(o.sinks, "iceberg") {
		log.Info("baseline: arrow-go Parquet")
		dir := filepath.Join(stack.Dir, o.name+"-baseline-parquet")
		rs, err := bench.IcebergBaselines(ctx, conn, bench.IcebergBaselineOptions{Dir: dir,
			CompressionLevel: config.DefaultCompressionLevel, ChunkRows: o.chunkRows, Limit1: limit1.Name})
		_ = os.RemoveAll(dir)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
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
func measureSluice(ctx context.Context, stack *devstack.Stack, root, dsn string, conn *pgx.Conn, o options, so bench.SinkOptions,
	log *slog.Logger) ([]bench.Result, []string, error) {
	temporal, err := stack.Ensure(ctx, devstack.ServiceTemporal)
	if err != nil {
		return nil, nil, err
	}
	work := filepath.Join(stack.Dir, o.name)
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
	each := func(kinds []string, suffix, what string, parallelism int,
		measure func(p *bench.Pipeline, t bench.SinkTarget) ([]bench.Result, error)) error {
		for _, kind := range kinds {
			dir := filepath.Join(work, kind+suffix)
			target, err := sinkTarget(ctx, stack, kind, dir, o.name)
			if err != nil {
				return err
			}
			p, err := bench.NewPipeline(bench.PipelineSpec{Name: o.name + "-" + kind, Dir: dir, SourceDSN: dsn, TemporalAddr: temporal.Addr,
				SinkYAML: target.SinkYAML, OrdersTarget: target.OrdersTarget, LatencyTarget: target.LatencyTarget,
				SnapshotChunkRows: o.chunkRows, SnapshotParallelism: parallelism, MaxWait: o.maxWait, ProfileDir: o.profileDir}, bins, tc)
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
	if err := each(o.sinks, "", "throughput", o.parallelism, func(p *bench.Pipeline, t bench.SinkTarget) ([]bench.Result, error) {
		return bench.MeasureSink(ctx, conn, p, t, so, log)
	}); err != nil {
		return out, failures, err
	}
	if o.scaling {
		for _, n := range scalingParallelism() {
			if err := each(o.sinks, fmt.Sprintf("-scaling-%d", n), fmt.Sprintf("scaling, snapshot_parallelism %d", n), n,
				func(p *bench.Pipeline, t bench.SinkTarget) ([]bench.Result, error) {
					r, err := bench.MeasureScaling(ctx, conn, p, t, o.rows, so.Limit1, log)
					if err != nil {
						return nil, err
					}
					return []bench.Result{r}, nil
				}); err != nil {
				return out, failures, err
			}
		}
	}
	if o.skipMemory || len(o.memorySinks) == 0 {
		return out, failures, nil
	}
	log.Info("memory cases: refilling public.orders", "rows", o.memoryRows)
	if err := bench.CreateOrders(ctx, conn, o.memoryRows); err != nil {
		return out, failures, err
	}
	mo := bench.MemoryOptions{Rows: o.memoryRows, Tx: o.memoryTx, ChunkRows: o.chunkRows, Limit1: so.Limit1}
	err = each(o.memorySinks, "-memory", "memory cases", o.parallelism, func(p *bench.Pipeline, t bench.SinkTarget) ([]bench.Result, error) {
		return bench.MeasureMemory(ctx, conn, p, t, mo, log)
	})
	return out, failures, err
}

// sinkTarget starts the sink's service when it has one and describes where the run writes.
func sinkTarget(ctx context.Context, stack *devstack.Stack, kind, dir, name string) (bench.SinkTarget, error) {
	switch kind {
	case "iceberg":
		return bench.IcebergTarget(dir), nil
	case "clickhouse":
		ch, err := stack.Ensure(ctx, devstack.ServiceClickHouse)
		if err != nil {
			return bench.SinkTarget{}, err
		}
		return bench.ClickHouseTarget(ch.Addr, "sluice_"+name), nil
	case "couchbase":
		cb, err := stack.Ensure(ctx, devstack.ServiceCouchbase)
		if err != nil {
			return bench.SinkTarget{}, err
		}
		scope := fmt.Sprintf("%s%d", strings.ReplaceAll(name, "_", ""), time.Now().Unix())
		return bench.CouchbaseTarget(cb.URL, cb.Extra["username"], cb.Extra["password"], cb.Extra["bucket"], scope), nil
	}
	return bench.SinkTarget{}, fmt.Errorf("--sinks: unknown sink %q; use iceberg, clickhouse or couchbase", kind)
}

// writeReport writes the report to stdout and to --out, keeping the hand-written blocks of the
// report it replaces. When those blocks cannot be read (damaged markers), --out is left as it is
// and the new report goes next to it, so that no hand-written text is lost.
func writeReport(ctx context.Context, report bench.Report, o options, failures []string) error {
	var old []byte
	if o.out != "" {
		var err error
		if old, err = os.ReadFile(o.out); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("reading %s: %w", o.out, err)
		}
	}
	kept, keptErr := bench.ParseKept(string(old))
	if keptErr != nil {
		kept, _ = bench.ParseKept("")
	}
	doc := bench.Document{Report: &report, MaxWait: o.maxWait, Failures: failures, Top: bench.PprofTop(15),
		Flags: fmt.Sprintf("--rows %d --bulk %d --small-tx %d --chunk-rows %d --parallelism %d --rate %d --latency-for %s --max-wait %s --sinks %s --memory-rows %d --memory-tx %d --memory-sinks %s --scaling=%t --profile-dir %s --name %s",
			o.rows, o.bulk, o.smallTx, o.chunkRows, o.parallelism, o.rate, o.latencyFor, o.maxWait, strings.Join(o.sinks, ","),
			o.memoryRows, o.memoryTx, strings.Join(o.memorySinks, ","), o.scaling, o.profileDir, o.name)}
	var buf bytes.Buffer
	doc.Write(ctx, &buf, kept)
	os.Stdout.Write(buf.Bytes())
	if o.out == "" {
		return nil
	}
	if keptErr != nil {
		side := o.out + ".new"
		if err := os.WriteFile(side, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", side, err)
		}
		return fmt.Errorf("%s was left as it is, the new report is %s: its hand-written blocks cannot be read: %w", o.out, side, keptErr)
	}
	if err := os.WriteFile(o.out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", o.out, err)
	}
	return nil
}
