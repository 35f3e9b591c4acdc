package tests

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// bins are the worker and starter built once for the package's tests (TestMain), with the
// fault points. Every process a test starts through localrun dies with the test binary.
var bins localrun.Binaries

// sourceDBs lends the tests' own SQL (writes, checks, slot reads) pooled connections to their
// databases: a connection per poll and per write round was a large share of the shared
// Postgres' work in make test.
var sourceDBs localrun.Pools

func TestMain(m *testing.M) {
	flag.Parse()
	setLanes()
	// The test binary reads whole tables to compare them and collected its small heap often, on
	// the cores the pipelines it waits for share: its heap may grow to five times the live data
	// instead.
	debug.SetGCPercent(400)
	// So may the processes it starts: the workers (each still bounded by its memory limit,
	// --memory-limit auto), the starter CLI and the go builds of TestMain; a worker's collector
	// took a large share of its CPU. A GOGC already set is kept.
	if _, set := os.LookupEnv("GOGC"); !set {
		os.Setenv("GOGC", "400")
	}
	// And they hand freed memory back to the kernel lazily (MADV_FREE): with the default
	// (MADV_DONTNEED) a worker faulted its heap's pages in again after each return, and a page
	// fault is dear on these virtual machines.
	godebug := "madvdontneed=0"
	if v := os.Getenv("GODEBUG"); v != "" {
		godebug = v + "," + godebug
	}
	os.Setenv("GODEBUG", godebug)
	// And they schedule their goroutines on one P (GOMAXPROCS=1): with many tests at once both
	// cores are busy, so a second P only spins looking for work, and wakes threads, on a machine
	// where a context switch is dear (in a profile the scheduler was about a quarter of a
	// worker's CPU). The race-built unit tests keep both Ps.
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		os.Setenv("GOMAXPROCS", "1")
	}
	dir, err := os.MkdirTemp("", "sluice-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	// The workers carry the fault points (build tag faults) that the commit-fault tests arm.
	bins, err = localrun.Build(ctx, "..", dir, localrun.FaultsTag)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building the worker and the starter:", err)
		os.Exit(1)
	}
	code := m.Run()
	sourceDBs.Close()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// icebergPipeline is one pipeline into a local Iceberg warehouse, on a fresh database and task
// queue, as a user would configure it.
type icebergPipeline struct {
	t        *testing.T
	name     string
	dsn      string
	dir      string
	config   string // path of the config file
	cfg      *config.Config
	env      []string
	temporal client.Client
	started  time.Time
}

// newIcebergPipeline creates a database (via setup SQL), and writes a config for tables (each
// "schema.table:target"). Warehouse and catalog live in the test's temp dir; dsn may name an
// existing database (empty: a fresh one).
func newIcebergPipeline(t *testing.T, dsn string, tables []string, setupSQL ...string) *icebergPipeline {
	t.Helper()
	return newPipeline(t, dsn, "", tables, setupSQL...)
}

// newPipeline is newIcebergPipeline with another sink section (YAML under sink:, indented by
// two spaces; empty means the local Iceberg warehouse).
func newPipeline(t *testing.T, dsn, sinkYAML string, tables []string, setupSQL ...string) *icebergPipeline {
	t.Helper()
	return newPipelineWith(t, pipelineOptions{DSN: dsn, Sink: sinkYAML, Tables: tables, SetupSQL: setupSQL})
}

// pipelineOptions configure newPipelineWith; zero fields take the defaults of newPipeline.
type pipelineOptions struct {
	DSN      string   // source database; empty: a fresh one
	Sink     string   // YAML under sink:, indented by two spaces; empty: a local Iceberg warehouse
	Tables   []string // "schema.table:target"
	SetupSQL []string // run on the source before the config is written
	Temporal string   // Temporal frontend host:port; empty: the shared dev server
	MaxWait  string   // batch.max_wait; empty: 500ms
	// ChunkRows is source.snapshot_chunk_rows; 0: 20000.
	ChunkRows int
	// TableYAML is added to every table's entry (keys indented by four spaces, each line ending
	// in a newline), such as "    where: qty < 50\n".
	TableYAML string
	// MaxParallelBackfills is source.max_parallel_backfills; 0: unset (read from the server).
	MaxParallelBackfills int
	// Env ("KEY=value") is the environment of every worker and starter of the pipeline, and of
	// the test's own loads of its config (loadConfig): SLUICE_* overrides and AWS_* credentials.
	Env []string
}

// newPipelineWith is newPipeline with every option, e.g. a private Temporal server.
func newPipelineWith(t *testing.T, o pipelineOptions) *icebergPipeline {
	t.Helper()
	dsn, sinkYAML, tables, setupSQL := o.DSN, o.Sink, o.Tables, o.SetupSQL
	temporalAddr := o.Temporal
	maxWait := o.MaxWait
	if maxWait == "" {
		maxWait = "500ms"
	}
	if temporalAddr == "" {
		temporalAddr = testenv.Temporal(t)
	}
	chunkRows := o.ChunkRows
	if chunkRows == 0 {
		chunkRows = 20000
	}
	if dsn == "" {
		dsn = testenv.NewDatabase(t)
	}
	p := &icebergPipeline{t: t, name: strings.ReplaceAll(testenv.RandomName("p"), "-", "_"), dsn: dsn, dir: t.TempDir(), env: o.Env}
	p.exec(setupSQL...)
	if sinkYAML == "" {
		sinkYAML = fmt.Sprintf("  type: iceberg\n  iceberg:\n    catalog:\n      type: sql\n      dialect: sqlite\n      uri: %s\n    warehouse: %s",
			filepath.Join(p.dir, "catalog.db"), filepath.Join(p.dir, "warehouse"))
	}
	sourceExtra := ""
	if o.MaxParallelBackfills > 0 {
		sourceExtra = fmt.Sprintf("\n  max_parallel_backfills: %d", o.MaxParallelBackfills)
	}
	var tb strings.Builder
	for _, spec := range tables {
		src, target, _ := strings.Cut(spec, ":")
		fmt.Fprintf(&tb, "  - source: %s\n    target: %s\n    metadata:\n      - {from: commit_ts, as: committed_at}\n      - {from: phase, as: source_phase}\n", src, target)
		tb.WriteString(o.TableYAML)
	}
	yaml := fmt.Sprintf(`pipeline: %s
source:
  dsn: %s
  snapshot_chunk_rows: %d%s
temporal:
  address: %s
  task_queue: %s
staging:
  url: %s
batch:
  max_rows: 5000
  max_wait: %s
sink:
%s
tables:
%s`, p.name, dsn, chunkRows, sourceExtra, temporalAddr, "sluice-"+p.name, filepath.Join(p.dir, "staging"), maxWait, sinkYAML, tb.String())
	p.config = filepath.Join(p.dir, "pipeline.yaml")
	if err := os.WriteFile(p.config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := p.loadConfig()
	if err != nil {
		t.Fatalf("test config does not load: %v", err)
	}
	p.cfg = cfg
	c, err := client.Dial(client.Options{HostPort: temporalAddr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	p.temporal = c
	p.started = time.Now().Add(-time.Second)
	t.Cleanup(func() {
		// Stop the pipeline's workflows so they do not outlive the test's database.
		_, _ = localrun.Sluice(context.Background(), bins.Starter, p.env, "stop", "--config", p.config)
	})
	return p
}

// loadConfig loads the pipeline's config as its workers do: with p.env's overrides, then the
// process environment's.
func (p *icebergPipeline) loadConfig() (*config.Config, error) {
	return config.LoadWith(p.config, func(name string) (string, bool) {
		for _, kv := range slices.Backward(p.env) {
			if k, v, ok := strings.Cut(kv, "="); ok && k == name {
				return v, true
			}
		}
		return os.LookupEnv(name)
	})
}

// exec runs SQL on the pipeline's source database.
func (p *icebergPipeline) exec(stmts ...string) {
	p.t.Helper()
	if len(stmts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := sourceDBs.Exec(ctx, p.dsn, stmts...); err != nil {
		p.t.Fatal(err)
	}
}

// worker starts a worker process for the pipeline, stopped at cleanup.
func (p *icebergPipeline) worker(name string) *localrun.Worker {
	p.t.Helper()
	return p.workerEnv(name)
}

// workerEnv is worker with extra environment variables ("KEY=value") for this process only.
func (p *icebergPipeline) workerEnv(name string, env ...string) *localrun.Worker {
	p.t.Helper()
	w, err := localrun.StartWorker(bins.Worker, p.config, filepath.Join(p.dir, name+".log"), append(append([]string(nil), p.env...), env...))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() {
		_ = w.Stop()
		if p.t.Failed() {
			if b, err := os.ReadFile(w.Log); err == nil {
				p.t.Logf("%s log, warnings, errors and the reader's publication decisions (last 8 KiB of them):\n%s",
					name, tailBytes(notableLines(b), 8192))
				p.t.Logf("%s log (last 4 KiB):\n%s", name, tailBytes(b, 4096))
			}
		}
	})
	return w
}

// notableLines keeps the lines of a worker log that say more than progress: warnings, errors,
// and the reader's decisions about tables met in the stream but not in the config (held or
// skipped, both name the publication), which the last lines of a busy log no longer show.
func notableLines(log []byte) []byte {
	var out []byte
	for line := range bytes.Lines(log) {
		if bytes.Contains(line, []byte("level=WARN")) || bytes.Contains(line, []byte("level=ERROR")) ||
			bytes.Contains(line, []byte("publication")) {
			out = append(out, line...)
		}
	}
	return out
}

func tailBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// sluice runs the starter CLI on the pipeline's config.
func (p *icebergPipeline) sluice(args ...string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := localrun.Sluice(ctx, bins.Starter, p.env, append(args, "--config", p.config)...)
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// waitStream waits until table's workflow (a run started by this test) streams with a position.
func (p *icebergPipeline) waitStream(table batch.TableName) {
	p.t.Helper()
	err := localrun.WaitFor(context.Background(), "table "+table.String()+" to finish its backfill", 3*time.Minute, 500*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, table, p.started)
			if err != nil {
				return false, "", err
			}
			return st.Phase == "stream" && st.HasPosition, fmt.Sprintf("phase %s rows %d error %q", st.Phase, st.Rows, st.LastError), nil
		})
	if err != nil {
		p.t.Fatal(err)
	}
}

// waitEqual waits until target equals the source table key by key over columns.
func (p *icebergPipeline) waitEqual(source, target, key string, columns []string) localrun.Table {
	p.t.Helper()
	var sink localrun.Table
	err := localrun.WaitFor(context.Background(), target+" to equal "+source, 3*time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			src, err := sourceDBs.Scan(ctx, p.dsn, source, key, columns)
			if err != nil {
				return false, "", err
			}
			got, err := localrun.ScanIceberg(ctx, p.cfg, target, key, append([]string{key}, columns...))
			if err != nil {
				return false, "", err
			}
			sink = localrun.Table{Columns: columns, Rows: map[string][]string{}}
			for k, r := range got.Rows {
				sink.Rows[k] = r[1:]
			}
			diff := localrun.Diff(src, sink, 5)
			return len(diff) == 0, fmt.Sprintf("%d+ differences: %s", len(diff), strings.Join(diff, "; ")), nil
		})
	if err != nil {
		p.t.Fatal(err)
	}
	return sink
}

// execSQL runs statements on dsn.
func execSQL(ctx context.Context, dsn string, stmts ...string) error {
	return sourceDBs.Exec(ctx, dsn, stmts...)
}

// waitEqualTo waits until read returns the source table's rows over columns, key by key.
func (p *icebergPipeline) waitEqualTo(source, key string, columns []string, read func(ctx context.Context) (localrun.Table, error)) {
	p.t.Helper()
	p.waitEqualWithin(3*time.Minute, source, key, columns, read)
}

// waitEqualWithin is waitEqualTo with its own deadline.
func (p *icebergPipeline) waitEqualWithin(timeout time.Duration, source, key string, columns []string, read func(ctx context.Context) (localrun.Table, error)) {
	p.t.Helper()
	err := localrun.WaitFor(context.Background(), "the sink to equal "+source, timeout, time.Second,
		func(ctx context.Context) (bool, string, error) {
			src, err := sourceDBs.Scan(ctx, p.dsn, source, key, columns)
			if err != nil {
				return false, "", err
			}
			got, err := read(ctx)
			if err != nil {
				return false, "", err
			}
			diff := localrun.Diff(src, got, 5)
			return len(diff) == 0, fmt.Sprintf("%d+ differences: %s", len(diff), strings.Join(diff, "; ")), nil
		})
	if err != nil {
		p.t.Fatal(err)
	}
}

// privateService starts service in a stack of the test's own (never the shared one), so the
// test may halt and restart it; the stack is stopped at cleanup.
func privateService(t *testing.T, service string) (*devstack.Stack, devstack.Info) {
	t.Helper()
	stack, err := devstack.New(filepath.Join(t.TempDir(), "stack"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Stop(context.Background()) })
	info, err := stack.Ensure(context.Background(), service)
	if err != nil {
		t.Fatalf("private %s: %v", service, err)
	}
	return stack, info
}
