// Command sluice-worker is the Sluice worker process: it reads one pipeline config, connects to
// Temporal, registers the workflows and activities (with the session worker on, for backfills),
// serves Prometheus metrics and a health check, and runs until SIGINT or SIGTERM, when it stops
// taking tasks, lets running ones finish within a grace period and closes its connections.
//
//	sluice-worker --config pipeline.yaml [--metrics-addr 127.0.0.1:9464] [--log-format json]
//	sluice-worker --version
//	sluice-worker healthcheck [--metrics-addr ADDR] [--ready]   (exit 0 healthy, 1 not)
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/control"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/internal/temporalconn"
	"github.com/sluicecdc/sluice/internal/version"
	"github.com/sluicecdc/sluice/metrics"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
	"github.com/sluicecdc/sluice/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-worker:", err)
		os.Exit(1)
	}
}

type options struct {
	config      string
	metricsAddr string
	logFormat   string
	logLevel    string
	shutdown    time.Duration
	pprof       bool
	cpuProfile  string
	memProfile  string
	memoryLimit string
}

func newCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "sluice-worker --config FILE",
		Short:         "Run a Sluice worker for one pipeline",
		Args:          cobra.NoArgs,
		Version:       version.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().StringVar(&o.config, "config", "", "pipeline config file (YAML); see docs/config.md")
	cmd.Flags().StringVar(&o.metricsAddr, "metrics-addr", defaultMetricsAddr, "address of /metrics and /healthz (empty: off)")
	cmd.Flags().StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	cmd.Flags().StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	cmd.Flags().DurationVar(&o.shutdown, "shutdown-grace", 30*time.Second, "how long running activities may finish after SIGTERM")
	cmd.Flags().BoolVar(&o.pprof, "pprof", false, "also serve net/http/pprof under /debug/pprof/ on --metrics-addr")
	cmd.Flags().StringVar(&o.cpuProfile, "cpu-profile", os.Getenv(cpuProfileEnv), "write a CPU profile of the whole run to this file (default $"+cpuProfileEnv+")")
	cmd.Flags().StringVar(&o.memProfile, "mem-profile", os.Getenv(memProfileEnv), "write a memory (allocs) profile to this file at shutdown (default $"+memProfileEnv+")")
	cmd.Flags().StringVar(&o.memoryLimit, "memory-limit", "auto", "soft limit of the Go heap: auto (GOMEMLIMIT, else 75% of the container's cgroup limit, else 5 x batch.max_bytes, at least 256MiB), off, or a size such as 400MiB")
	_ = cmd.MarkFlagRequired("config")
	cmd.AddCommand(newHealthcheckCommand())
	cmd.CompletionOptions.DisableDefaultCmd = true
	return cmd
}

// nameBinary gives the Temporal SDK the binary's identity, so that a worker's start does not
// read and md5 its whole executable (about 100 MB, 0.2-0.3 s of CPU at every start, seen in the
// benchmark's profiles): the SDK hashes it at start unless a checksum was set, whatever
// worker.Options.BuildID says (sdk v1.51, AggregatedWorker.start). The checksum is the SDK's
// process-wide setting; the build ID is what the server records for the worker anyway.
func nameBinary(id string) {
	worker.SetBinaryChecksum(id)
}

func run(ctx context.Context, o options) error {
	log, err := newLogger(o.logFormat, o.logLevel)
	if err != nil {
		return err
	}
	faultPoints, err := armFaults(log) // first, so a test build's bad SLUICE_FAULTS stops it at once
	if err != nil {
		return err
	}
	cfg, err := config.Load(o.config)
	if err != nil {
		return err
	}
	log = log.With(logkey.Pipeline, cfg.Pipeline)
	if err := applyMemoryLimit(o.memoryLimit, int64(cfg.Batch.MaxBytes), log); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	defer func() {
		if err := writeMemProfile(o.memProfile); err != nil {
			log.Warn("writing the memory profile", logkey.Error, err)
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sdkHandler, err := sdkMetrics(reg, log.With(logkey.Module, "metrics"))
	if err != nil {
		return err
	}
	m := metrics.New(reg, map[string][]string{cfg.Pipeline: tableNames(cfg)})
	tc, err := temporalconn.Dial(ctx, cfg.Temporal, client.Options{
		Logger:         tlog.NewStructuredLogger(log.With(logkey.Module, "temporal")),
		MetricsHandler: sdkHandler,
	})
	if err != nil {
		return err
	}
	defer tc.Close()
	health := newHealth()
	go health.watch(ctx, tc)

	store, err := staging.Open(ctx, cfg.Staging.URL, "", "")
	if err != nil {
		return fmt.Errorf("opening staging.url: %w", err)
	}
	defer store.Close()
	sinkSet := pipeline.NewSinks(cfg, log.With(logkey.Module, "sink"))
	defer func() { _ = sinkSet.Close(context.Background()) }()

	tables := control.Tables{Client: tc, TaskQueue: cfg.Temporal.TaskQueue, Options: pipeline.TableOptions(cfg)}
	sources := pipeline.SourceConfigs(cfg)
	authority := pipeline.Authority(cfg) // every activity input is checked against the config
	conns := &source.Pool{}              // the activities' short catalog reads share connections
	defer conns.Close()
	backfills := &activities.Backfill{Sinks: sinkSet, Sources: sources, Logger: log.With(logkey.Module, "snapshot"), Faults: faultPoints,
		Authority: authority, Metrics: m, CatalogRecords: store}
	defer activities.CloseSnapshots(context.Background(), backfills)

	nameBinary(version.Get().BuildID())
	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{
		EnableSessionWorker: true,
		// A backfill is a session; the sessions beyond this wait for one to end.
		MaxConcurrentSessionExecutionSize: parallelBackfills(ctx, cfg, log),
		// Two activity pollers left 500 starting tables' short activities queued 40 s each; with
		// 8 they waited at most 7 s. The SDK's workflow pollers serve the sticky queue first, so
		// new table runs wait for their first task while backfills run (docs/architecture.md,
		// "Many tables"); more workflow pollers shorten that.
		MaxConcurrentWorkflowTaskPollers: taskPollers,
		MaxConcurrentActivityTaskPollers: taskPollers,
		WorkerStopTimeout:                o.shutdown,
		// Short activities run with a heartbeat timeout: a killed worker is noticed in seconds.
		// (A test build's armed faults come first: activity.start fires before anything runs.)
		Interceptors: append(faultInterceptors(faultPoints), &activities.Heartbeats{}),
		// Heartbeats reach the server (and a cancellation, e.g. a paused backfill's slice, the
		// activity) at least this often: the SDK's default holds them back up to 80% of the
		// heartbeat timeout, leaving a busy worker little margin before it.
		MaxHeartbeatThrottleInterval: workflows.ShortHeartbeat / 4,
		OnFatalError:                 health.setFatal,
		// Named from the build info, which names the worker in task completions. (Deprecated in
		// favour of deployment versions, which Sluice does not use.)
		BuildID: version.Get().BuildID(), //nolint:staticcheck // see above
	})
	workflows.Register(w)
	activities.Set{
		Commit: &activities.Commit{Sinks: sinkSet, Staging: store, Faults: faultPoints, HeartbeatEvery: workflows.ShortHeartbeat / 4,
			Authority: authority, Metrics: m},
		Backfill: backfills,
		Setup: &activities.Setup{Tables: tables, Sources: sources, Logger: log.With(logkey.Module, "setup"), Authority: authority,
			Conns: conns},
		Reader: &activities.Reader{Staging: store, Tables: tables, Sources: sources, Logger: log.With(logkey.Module, "reader"),
			Authority: authority, Metrics: m},
	}.Register(w)

	if o.metricsAddr != "" {
		srv, addr, err := serveMetrics(o.metricsAddr, reg, health, o.pprof)
		if err != nil {
			return err
		}
		defer srv.Shutdown(context.Background())
		log.Info("serving metrics", logkey.Addr, addr) // the port chosen, for --metrics-addr 127.0.0.1:0
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting the worker on task queue %s: %w", cfg.Temporal.TaskQueue, err)
	}
	health.setStarted()
	go observe(ctx, cfg, conns, tables, m, log.With(logkey.Module, "observe"))
	log.Info("worker started", logkey.TaskQueue, cfg.Temporal.TaskQueue, logkey.Temporal, cfg.Temporal.Address)
	<-ctx.Done()
	log.Info("stopping: finishing running tasks", logkey.Grace, o.shutdown)
	w.Stop()
	log.Info("worker stopped")
	return nil
}

// taskPollers is how many workflow task polls, and activity task polls, the worker keeps open
// (the SDK's default: 2 each).
const taskPollers = 8

// parallelBackfills is source.max_parallel_backfills, or when it is not set what the source
// server has free (1 when it cannot be read: the worker still starts).
func parallelBackfills(ctx context.Context, cfg *config.Config, log *slog.Logger) int {
	if n := cfg.Source.MaxParallelBackfills; n > 0 {
		return n
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := source.ReadReplicationCapacity(ctx, cfg.Source.DSN, cfg.Source.Slot)
	if err != nil {
		log.Warn("reading the source's free replication slots failed; backfilling one table at a time (set source.max_parallel_backfills)", logkey.Error, err)
		return 1
	}
	n := c.DefaultParallelBackfills()
	log.Info("parallel backfills from the source's free replication slots and walsenders", logkey.MaxParallelBackfills, n,
		logkey.MaxReplicationSlots, c.MaxSlots, logkey.SlotsInUse, c.Slots, logkey.MaxWalSenders, c.MaxSenders, logkey.WalsendersInUse, c.Senders)
	return n
}

func newLogger(format, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// serveMetrics serves /metrics from reg, /healthz (alive: Temporal reachable, the worker
// polling) and /readyz (also started and checked) on addr until Shutdown.
func serveMetrics(addr string, reg *prometheus.Registry, h *health, withPprof bool) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listening on --metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(metrics.Path, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle(healthPath, h.handler(false))
	mux.Handle(readyPath, h.handler(true))
	if withPprof {
		handlePprof(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("metrics server stopped", logkey.Error, err)
		}
	}()
	return srv, ln.Addr().String(), nil
}

// tableNames are the configured tables as the metrics label them (schema.name).
func tableNames(cfg *config.Config) []string {
	var names []string
	for _, t := range pipeline.SourceTables(cfg) {
		names = append(names, t.Table.String())
	}
	return names
}
