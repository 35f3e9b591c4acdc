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
	"github.com/sluicecdc/sluice/internal/localrun"
	"github.com/sluicecdc/sluice/sinks/plugin/plugintest"
)

// pluginSinks are the example plugins as sinks of the fault tests, each run as its own process
// reached over gRPC. The JSON Lines plugin has no position of its own: its positions are in the
// position store, in the source database (the default).
func pluginSinks() []sinkKind {
	return []sinkKind{{"jsonl", func(t *testing.T) destination { return startJSONL(t).destination() }}}
}

// jsonlPlugin is a running JSON Lines example plugin writing under root.
type jsonlPlugin struct {
	t         *testing.T
	bin, root string
	proc      *plugintest.Process
}

// startJSONL builds and starts the JSON Lines example plugin on a free port.
func startJSONL(t *testing.T) *jsonlPlugin {
	t.Helper()
	p := &jsonlPlugin{t: t, bin: plugintest.Build(t, "./examples/plugins/jsonl"), root: t.TempDir()}
	p.proc = plugintest.Start(t, p.bin, nil, "-listen", "127.0.0.1:0", "-dir", p.root)
	return p
}

// restart starts the plugin again on its address, over the same files.
func (p *jsonlPlugin) restart() {
	p.t.Helper()
	p.proc = plugintest.Start(p.t, p.bin, nil, "-listen", p.proc.Addr, "-dir", p.root)
}

// destination is the plugin as a sink section; its reader replays the target's files as a user
// of them would and prints every member as the Couchbase reader does (jsonText).
func (p *jsonlPlugin) destination() destination {
	return destination{
		yaml:   fmt.Sprintf("  type: plugin\n  plugin:\n    address: %s", p.proc.Addr),
		target: func(table string) string { return "raw." + table },
		items:  e2eColumns,
		read: func(_ *icebergPipeline, target string, columns, _ []string) sinkReader {
			return func(context.Context) (localrun.Table, error) {
				rows, err := jsonlsink.ReadTable(p.root, target)
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
}

// TestPluginWorkerKilledAtCommitPoints is TestWorkerKilledAtCommitPoints on the example plugins:
// a worker SIGKILLed just before its commit's write to the plugin, and just after the write
// (the plugin acknowledged, the position store written) before the staged file is acknowledged.
// Live inserts, updates and deletes run throughout; the plugin's files then equal the source key
// by key: a replayed batch brings no deleted row back.
func TestPluginWorkerKilledAtCommitPoints(t *testing.T) {
	t.Parallel()
	for _, sink := range pluginSinks() {
		for _, point := range []faults.Point{faults.CommitBeforeWrite, faults.CommitAfterWrite} {
			t.Run(sink.name+"/"+string(point), func(t *testing.T) {
				t.Parallel()
				p, read := commitFaultPipeline(t, sink.dest(t))
				w, failure := armedWorker(t, p, point)
				if failure != "" {
					w.stop(t)
					t.Fatalf("the table stopped after the crash at %s: %s", point, failure)
				}
				w.stop(t)
				p.waitEqualTo("public.items", "id", e2eColumns, read)
			})
		}
	}
}

// TestPluginKilledAndUnreachable SIGKILLs the JSON Lines plugin while live changes stream (a
// batch may be mid-Apply: its rows partly appended, its position not stored) and keeps it down
// for 30 seconds. The table's CommitBatch retries visibly (transient), and once the plugin runs
// again on its address over the same files, the target equals the source key by key.
func TestPluginKilledAndUnreachable(t *testing.T) {
	t.Parallel()
	pl := startJSONL(t)
	p, read := commitFaultPipeline(t, pl.destination())
	p.worker("w")
	p.sluice("start")
	p.waitStream(itemsTable)
	w := startCommitFaultWriter(p)
	time.Sleep(2 * time.Second) // commits in flight when the plugin dies
	if err := pl.proc.Kill(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	seen := waitCommitRetried(t, p, "the plugin is down")
	t.Logf("while the plugin was down: %s", seen)
	time.Sleep(time.Until(down.Add(30 * time.Second)))
	pl.restart()
	w.stop(t)
	p.waitEqualTo("public.items", "id", e2eColumns, read)
}

// unmarshalJSON decodes raw (a missing value is null) into v.
func unmarshalJSON(raw []byte, v any) error {
	if raw == nil {
		raw = []byte("null")
	}
	return json.Unmarshal(raw, v)
}
