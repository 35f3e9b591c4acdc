package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/examples/plugins/jsonl/jsonlsink"
	"github.com/sluicecdc/sluice/internal/faults"
	"github.com/sluicecdc/sluice/sinks/plugin/plugintest"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// pluginKind is an example plugin the fault tests run on: start builds it and runs it as its own
// process, reached over gRPC, writing into a destination of the test's own.
type pluginKind struct {
	name  string
	start func(t *testing.T) *runningPlugin
}

// pluginSinks are the example plugins as sinks of the fault tests. The JSON Lines plugin has no
// position of its own: its positions are in the position store, in the source database (the
// default). The Postgres plugin keeps its own, in its target database.
func pluginSinks() []pluginKind {
	return []pluginKind{
		{"jsonl", func(t *testing.T) *runningPlugin { return startJSONL(t) }},
		{"postgres", func(t *testing.T) *runningPlugin { return startPostgresPlugin(t) }},
	}
}

// runningPlugin is a started example plugin and the destination it writes.
type runningPlugin struct {
	t    *testing.T
	bin  string
	env  []string
	args []string // its arguments but -listen
	proc *plugintest.Process
	dest destination
	dsn  string // the target database of the Postgres plugin
}

// startPlugin builds the example plugin of package pkg and starts it on a free port.
func startPlugin(t *testing.T, pkg string, env []string, args ...string) *runningPlugin {
	t.Helper()
	p := &runningPlugin{t: t, bin: plugintest.Build(t, pkg), env: env, args: args}
	p.proc = plugintest.Start(t, p.bin, env, append([]string{"-listen", "127.0.0.1:0"}, args...)...)
	return p
}

// restart starts the plugin again on its address, over the same destination.
func (p *runningPlugin) restart() {
	p.t.Helper()
	p.proc = plugintest.Start(p.t, p.bin, p.env, append([]string{"-listen", p.proc.Addr}, p.args...)...)
}

// pluginYAML is the sink section of a plugin listening on addr.
func pluginYAML(addr string) string {
	return fmt.Sprintf("  type: plugin\n  plugin:\n    address: %s", addr)
}

// startJSONL starts the JSON Lines example plugin writing under a temp dir. Its reader replays
// the target's files as a user of them would and prints every member as the Couchbase reader
// does (jsonText).
func startJSONL(t *testing.T) *runningPlugin {
	t.Helper()
	root := t.TempDir()
	p := startPlugin(t, "./examples/plugins/jsonl", nil, "-dir", root)
	p.dest = destination{
		yaml:   pluginYAML(p.proc.Addr),
		target: func(table string) string { return "raw." + table },
		items:  e2eColumns,
		read: func(_ *icebergPipeline, target string, columns, _ []string) sinkReader {
			return func(context.Context) (localrun.Table, error) {
				rows, err := jsonlsink.ReadTable(root, target)
				if err != nil {
					return localrun.Table{}, err
				}
				out := localrun.Table{Columns: columns, Rows: map[string][]string{}}
				for _, l := range rows {
					var id int64
					if err := unmarshalJSON(l.Row["id"], &id); err != nil {
						return out, fmt.Errorf("target %s: id %s: %w", target, l.Row["id"], err)
					}
					vals := make([]string, len(columns))
					for i, c := range columns {
						if vals[i], err = jsonText(l.Row[c]); err != nil {
							return out, fmt.Errorf("target %s: column %s: %w", target, c, err)
						}
					}
					out.Rows[strconv.FormatInt(id, 10)] = vals
				}
				return out, nil
			}
		},
	}
	return p
}

// startPostgresPlugin starts the Postgres example plugin writing into a fresh database of the
// test server (its targets are tables of schema public there). Its reader reads a target table
// with localrun.ScanPostgres, so every column prints as the source's does.
func startPostgresPlugin(t *testing.T) *runningPlugin {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	p := startPlugin(t, "./examples/plugins/postgres", []string{"SLUICE_PLUGIN_POSTGRES_DSN=" + dsn})
	p.dsn = dsn
	p.dest = postgresPluginDestination(p.proc.Addr, dsn)
	return p
}

// postgresPluginDestination is the Postgres example plugin listening on addr, writing into the
// database dsn.
func postgresPluginDestination(addr, dsn string) destination {
	return destination{
		yaml:   pluginYAML(addr),
		target: func(table string) string { return table },
		items:  e2eColumns,
		read: func(_ *icebergPipeline, target string, columns, _ []string) sinkReader {
			return func(ctx context.Context) (localrun.Table, error) {
				return sourceDBs.Scan(ctx, dsn, "public."+target, "id", columns)
			}
		},
	}
}

// TestPluginWorkerKilledAtCommitPoints is TestWorkerKilledAtCommitPoints on the example plugins:
// a worker SIGKILLed just before its commit's write to the plugin, and just after the write
// (the plugin acknowledged, its position stored: in the position store for the JSON Lines plugin,
// in the plugin's own database for the Postgres one) before the staged file is acknowledged. Live
// inserts, updates and deletes run throughout; the plugin's target then equals the source key by
// key, every column: a replayed batch brings no deleted row back.
func TestPluginWorkerKilledAtCommitPoints(t *testing.T) {
	defer parallel(t)()
	for _, sink := range pluginSinks() {
		for _, point := range []faults.Point{faults.CommitBeforeWrite, faults.CommitAfterWrite} {
			t.Run(sink.name+"/"+string(point), func(t *testing.T) {
				defer parallel(t)()
				killedAtCommitPoint(t, sink.start(t).dest, point)
			})
		}
	}
}

// TestPluginKilledAndUnreachable SIGKILLs each example plugin while live changes stream (a
// batch may be mid-Apply: its rows partly written, its position not stored) and keeps it down
// until the table's CommitBatch retries visibly (transient) and the table's workflow retries the
// failed step itself (the attempts of one execution spent); once the plugin runs again on its
// address over the same destination, the target equals the source key by key.
func TestPluginKilledAndUnreachable(t *testing.T) {
	defer parallel(t)()
	for _, kind := range pluginSinks() {
		t.Run(kind.name, func(t *testing.T) {
			defer parallel(t)()
			pl := kind.start(t)
			p, read := commitFaultPipeline(t, pl.dest)
			p.worker("w")
			p.sluice("start")
			p.waitStream(itemsTable)
			w := startCommitFaultWriter(p)
			w.waitMore(t, 10, "commits in flight when the plugin dies")
			if err := pl.proc.Kill(); err != nil {
				t.Fatal(err)
			}
			down := time.Now()
			seen := waitCommitRetried(t, p, "the plugin is down")
			t.Logf("while the plugin was down: %s", seen)
			t.Logf("then: %s", p.waitTableRetrying(itemsTable, "the plugin is down"))
			pl.restart()
			t.Logf("the plugin was down for %s", time.Since(down).Round(time.Second))
			w.stop(t)
			p.waitEqualTo("public.items", "id", e2eColumns, read)
		})
	}
}

// TestPluginPoisonBatch is TestPoisonBatchOnClickHouseAndCouchbase on the Postgres example
// plugin: the operator adds a CHECK constraint to the plugin's target table a that the next
// changed rows of public.a violate. The plugin classes the violation (SQLSTATE 23514) as poison,
// so public.a stops with PoisonBatch naming the table and the plugin's error, `sluice status`
// shows it failed, its position (the plugin's own) stays before the poisoned rows and its old
// rows stay, while public.b goes on. The fix is in place: drop the constraint and
// `sluice resume --table public.a`; the new run resumes from the committed position and the
// target equals the source key by key, every column.
func TestPluginPoisonBatch(t *testing.T) {
	defer parallel(t)()
	var dsn string
	runPoison(t, poisonCase{
		name: "postgres-plugin",
		open: func(t *testing.T) (*icebergPipeline, sinkReader, sinkReader, string) {
			pl := startPostgresPlugin(t)
			dsn = pl.dsn
			p := newPipeline(t, "", pl.dest.yaml, []string{"public.a:a", "public.b:b"}, twoTablesDDL(poisonSeed)...)
			read := func(target string) sinkReader { return pl.dest.read(p, target, twoTableColumns, nil) }
			return p, read("a"), read("b"), "a"
		},
		breakSink: func(t *testing.T, ctx context.Context) {
			if err := execSQL(ctx, dsn, `ALTER TABLE public.a ADD CONSTRAINT a_qty_small CHECK (qty < 5000) NOT VALID`); err != nil {
				t.Fatalf("adding a CHECK constraint to the plugin's target: %v", err)
			}
		},
		poisonSQL: func(i int) string {
			return fmt.Sprintf(`INSERT INTO public.a VALUES (%[1]d, 'poisoned-%[1]d', %[1]d);
				UPDATE public.a SET qty = qty + 1 WHERE id %% 100 = %[2]d`, 10000+i, i)
		},
		wantInErr: []string{`violates check constraint "a_qty_small"`, "SQLSTATE 23514"},
		fix: func(t *testing.T, ctx context.Context, _ *icebergPipeline) {
			if err := execSQL(ctx, dsn, `ALTER TABLE public.a DROP CONSTRAINT a_qty_small`); err != nil {
				t.Fatalf("dropping the CHECK constraint of the plugin's target: %v", err)
			}
		},
	})
}

// unmarshalJSON decodes raw (a missing value is null) into v.
func unmarshalJSON(raw []byte, v any) error {
	if raw == nil {
		raw = []byte("null")
	}
	return json.Unmarshal(raw, v)
}
