package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/workflows"
)

// Benchmark tables: the generated orders table and the small table the latency run inserts into.
var (
	OrdersTable  = batch.TableName{Schema: "public", Name: "orders"}
	LatencyTable = batch.TableName{Schema: "public", Name: "bench_latency"}
)

// PipelineSpec is one benchmark pipeline: the orders and latency tables of the source database
// into one sink, with its own pipeline name, slot, publication and task queue.
type PipelineSpec struct {
	Name              string // pipeline name, e.g. bench-clickhouse
	Dir               string // working directory: config, staging, logs, local warehouse
	SourceDSN         string
	TemporalAddr      string
	SinkYAML          string // the sink section's body, indented by two spaces
	OrdersTarget      string
	LatencyTarget     string
	SnapshotChunkRows int
	// SnapshotParallelism, when positive, sets source.snapshot_parallelism (absent otherwise,
	// so that builds older than the key load the config).
	SnapshotParallelism int
	MaxWait             time.Duration
	// ProfileDir, when set, gets a CPU and a heap profile of each worker process.
	ProfileDir string
}

// Pipeline is a configured benchmark pipeline with its worker process.
type Pipeline struct {
	Spec       PipelineSpec
	ConfigPath string
	Config     *config.Config
	Bins       localrun.Binaries
	Temporal   client.Client
	worker     *localrun.Worker
	workers    int
	heap       *heapWatcher // the running worker's heap watch, nil without profiles
	prof       Profiles     // the running worker's profiles
}

// NewPipeline writes spec's config file into spec.Dir and loads it back as the worker will.
func NewPipeline(spec PipelineSpec, bins localrun.Binaries, tc client.Client) (*Pipeline, error) {
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", spec.Dir, err)
	}
	yaml := fmt.Sprintf(`pipeline: %s
source:
  dsn: %s
  snapshot_chunk_rows: %d%s
temporal:
  address: %s
  task_queue: sluice-%s
staging:
  url: %s
batch:
  max_rows: 100000
  max_bytes: 64MiB
  max_wait: %s
sink:
%s
tables:
  - source: %s
    target: %s
  - source: %s
    target: %s
`, spec.Name, spec.SourceDSN, spec.SnapshotChunkRows, parallelismYAML(spec.SnapshotParallelism), spec.TemporalAddr, spec.Name,
		filepath.Join(spec.Dir, "staging"), spec.MaxWait, spec.SinkYAML,
		OrdersTable, spec.OrdersTarget, LatencyTable, spec.LatencyTarget)
	path := filepath.Join(spec.Dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("benchmark config of %s does not load: %w", spec.Name, err)
	}
	return &Pipeline{Spec: spec, ConfigPath: path, Config: cfg, Bins: bins, Temporal: tc}, nil
}

// Slot is the pipeline's replication slot (and publication) name.
func (p *Pipeline) Slot() string { return "sluice_" + strings.ReplaceAll(p.Spec.Name, "-", "_") }

// StartWorker starts a fresh worker process for the pipeline (stopping the previous one), so
// its peak RSS and its profiles cover only what follows. With a ProfileDir, the worker writes a
// CPU profile of its run at exit and serves pprof, whose heap profile is fetched as its RSS
// grows (see EndPhase).
func (p *Pipeline) StartWorker() error {
	if err := p.StopWorker(); err != nil {
		return err
	}
	p.workers++
	var env, args []string
	p.prof = Profiles{}
	if p.Spec.ProfileDir != "" {
		if err := os.MkdirAll(p.Spec.ProfileDir, 0o755); err != nil {
			return fmt.Errorf("creating the profile directory: %w", err)
		}
		// Named after the pipeline's directory (iceberg, iceberg-memory, iceberg-scaling-2, ...),
		// which differs between a sink's pipelines where their pipeline name does not.
		base := filepath.Join(p.Spec.ProfileDir, fmt.Sprintf("%s-worker-%d", filepath.Base(p.Spec.Dir), p.workers))
		p.prof = Profiles{CPU: base + ".cpu.pprof", Heap: base + ".heap.pprof", Binary: p.Bins.Worker}
		env = append(env, "SLUICE_CPU_PROFILE="+p.prof.CPU)
		args = append(args, "--pprof")
	}
	w, err := localrun.StartWorker(p.Bins.Worker, p.ConfigPath, filepath.Join(p.Spec.Dir, fmt.Sprintf("worker-%d.log", p.workers)), env, args...)
	if err != nil {
		return err
	}
	p.worker = w
	if p.Spec.ProfileDir != "" {
		p.heap = watchHeap(w, p.prof.Heap, 250*time.Millisecond)
	}
	return nil
}

// EndPhase ends the heap watch of the running worker and returns its profiles: the heap profile
// as of the highest RSS seen, and the CPU profile it writes when it stops (so that profile runs
// until then). Empty without a ProfileDir.
func (p *Pipeline) EndPhase() Profiles {
	if p.heap == nil {
		return p.prof
	}
	rss, err := p.heap.Stop()
	p.heap = nil
	p.prof.HeapRSS = rss
	if rss == 0 {
		p.prof.Heap = ""
		p.prof.HeapErr = fmt.Sprint(err)
	}
	return p.prof
}

// StopWorker stops the worker process, if one runs.
func (p *Pipeline) StopWorker() error {
	if p.heap != nil {
		p.EndPhase()
	}
	if p.worker == nil {
		return nil
	}
	err := p.worker.Stop()
	p.worker = nil
	return err
}

// WorkerPeakRSS is the running worker's peak resident set size in bytes (VmHWM).
func (p *Pipeline) WorkerPeakRSS() int64 {
	if p.worker == nil {
		return 0
	}
	return PeakRSS(p.worker.PID())
}

// Start runs `sluice start` and returns the time it was issued.
func (p *Pipeline) Start(ctx context.Context) (time.Time, error) {
	at := time.Now()
	_, err := localrun.Sluice(ctx, p.Bins.Starter, nil, "start", "--config", p.ConfigPath)
	return at, err
}

// Stop runs `sluice stop` (terminating the pipeline's workflows; positions stay in the sink).
func (p *Pipeline) Stop(ctx context.Context) error {
	_, err := localrun.Sluice(ctx, p.Bins.Starter, nil, "stop", "--config", p.ConfigPath)
	return err
}

// WaitStream waits until the table's workflow, in a run started since since, streams with a
// committed position: the end of its backfill.
func (p *Pipeline) WaitStream(ctx context.Context, table batch.TableName, since time.Time, timeout time.Duration) error {
	return localrun.WaitFor(ctx, "table "+table.String()+" of "+p.Spec.Name+" to finish its backfill", timeout, 100*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.Temporal, p.Spec.Name, table, since.Add(-time.Second))
			if err != nil {
				return false, "", err
			}
			return st.Phase == workflows.StateStream && st.HasPosition,
				fmt.Sprintf("phase %s rows %d error %q", st.Phase, st.Rows, st.LastError), nil
		})
}

// WaitPosition waits until the table's committed position reaches lsn.
func (p *Pipeline) WaitPosition(ctx context.Context, table batch.TableName, since time.Time, lsn uint64, timeout time.Duration) error {
	return localrun.WaitFor(ctx, fmt.Sprintf("table %s of %s to commit %s", table, p.Spec.Name, pglogrepl.LSN(lsn)), timeout, 100*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.Temporal, p.Spec.Name, table, since.Add(-time.Second))
			if err != nil {
				return false, "", err
			}
			return st.HasPosition && st.Position.Position.LSN >= lsn,
				fmt.Sprintf("phase %s position %s rows %d queue %d error %q", st.Phase, st.Position.Position, st.Rows, st.QueueLength, st.LastError), nil
		})
}

// DropSlot removes the pipeline's slot and publication from the source, ending a walsender
// that still holds the slot.
func (p *Pipeline) DropSlot(ctx context.Context, conn *pgx.Conn) {
	_, _ = conn.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", p.Slot())
	for range 20 {
		if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", p.Slot()); err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	_, _ = conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{p.Slot()}.Sanitize())
}

// Marker commits a one-row update of public.orders and returns the WAL position taken just
// before its commit: once a table's committed position reaches it, every transaction committed
// before the marker is in the sink (a table's position only moves by committed batches, in
// commit order).
func Marker(ctx context.Context, conn *pgx.Conn) (uint64, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "UPDATE public.orders SET updated_at = updated_at + interval '1 second' WHERE id = 1"); err != nil {
		return 0, fmt.Errorf("marker update: %w", err)
	}
	var text string
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&text); err != nil {
		return 0, err
	}
	lsn, err := pglogrepl.ParseLSN(text)
	if err != nil {
		return 0, err
	}
	return uint64(lsn), tx.Commit(ctx)
}

// parallelismYAML is the source.snapshot_parallelism line of a config ("" for n <= 0).
func parallelismYAML(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("\n  snapshot_parallelism: %d", n)
}
