package tests

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/internal/faults"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
	"github.com/sluicecdc/sluice/testkit/workload"
	"github.com/sluicecdc/sluice/workflows"
)

// workloadSinks are the sinks every workload test runs on.
var workloadSinks = []string{"iceberg", "clickhouse", "couchbase"}

// workloadPipeline is a pipeline replicating the workload's tables into one sink, with the
// generator that writes them and the sink's reader.
type workloadPipeline struct {
	*icebergPipeline
	gen  *workload.Generator
	sink workload.Sink
}

// workloadSeed is SLUICE_WORKLOAD_SEED when set (to replay a failure), else a fresh seed.
func workloadSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("SLUICE_WORKLOAD_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_WORKLOAD_SEED=%q: %v", s, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// newWorkloadPipeline creates the workload's tables in a fresh database, fills them with
// rows[table] rows each (while nothing replicates yet: the backfill's initial state), and
// configures a pipeline into sinkName with backfill chunks of chunkRows rows.
func newWorkloadPipeline(t *testing.T, sinkName string, chunkRows int, rows map[string]int) *workloadPipeline {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dsn := testenv.NewDatabase(t)
	seed := workloadSeed(t)
	gen := workload.New(dsn, seed)
	t.Cleanup(func() {
		_ = gen.Close(context.Background())
		if t.Failed() {
			t.Logf("workload seed %d (replay with SLUICE_WORKLOAD_SEED=%d): %s", seed, seed, gen.Stats())
		}
	})
	if err := gen.Create(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tb := range gen.Tables() {
		if err := gen.Fill(ctx, tb.Name, rows[tb.Name]); err != nil {
			t.Fatal(err)
		}
	}
	w := &workloadPipeline{gen: gen}
	var sinkYAML string
	var env []string
	target := func(name string) string { return name }
	switch sinkName {
	case "iceberg":
		target = func(name string) string { return "raw." + name }
	case "iceberg-rest": // examples/iceberg-s3.yaml: the REST catalog and S3 of devstack's weed
		ns := testenv.RandomName("wl_")
		target = func(name string) string { return ns + "." + name }
		sinkYAML, env = icebergRESTExample(t)
		dropIcebergNamespace(t, func() *config.Config {
			if w.icebergPipeline == nil {
				return nil
			}
			return w.cfg
		}, ns)
	case "clickhouse":
		addr := testenv.ClickHouse(t)
		db := testenv.RandomName("sluice_wl_")
		sinkYAML = fmt.Sprintf("  type: clickhouse\n  clickhouse:\n    addr: %s\n    database: %s", addr, db)
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.Native, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db); _ = conn.Close() })
		w.sink = &workload.ClickHouseSink{Conn: conn, Database: db, Target: target}
	case "couchbase":
		cb := testenv.Couchbase(t)
		scope := testenv.RandomName("wl")
		target = func(name string) string { return scope + "." + name }
		sinkYAML = couchbaseYAML(cb)
		bucket := couchbaseBucket(t, cb)
		w.sink = workload.CouchbaseSink{Bucket: bucket, Collection: func(name string) (string, string) { return scope, name }}
	}
	var tables []string
	for _, tb := range gen.Tables() {
		tables = append(tables, tb.Qualified()+":"+target(tb.Name))
	}
	w.icebergPipeline = newPipelineWith(t, pipelineOptions{DSN: dsn, Sink: sinkYAML, Tables: tables, Env: env})
	w.setChunkRows(chunkRows)
	if sinkName == "iceberg" || sinkName == "iceberg-rest" {
		w.sink = workload.IcebergSink{Config: w.cfg, Target: target}
	}
	return w
}

// setConfig rewrites the pipeline's config, replacing old with new (before any worker or
// starter reads it).
func (w *workloadPipeline) setConfig(old, new string) {
	w.t.Helper()
	b, err := os.ReadFile(w.config)
	if err != nil {
		w.t.Fatal(err)
	}
	text := strings.Replace(string(b), old, new, 1)
	if text == string(b) {
		w.t.Fatalf("the pipeline config has no %q to replace", old)
	}
	if err := os.WriteFile(w.config, []byte(text), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if w.cfg, err = w.loadConfig(); err != nil {
		w.t.Fatal(err)
	}
}

// setChunkRows rewrites the pipeline's config with source.snapshot_chunk_rows n (before any
// worker or starter reads it).
func (w *workloadPipeline) setChunkRows(n int) {
	w.t.Helper()
	b, err := os.ReadFile(w.config)
	if err != nil {
		w.t.Fatal(err)
	}
	text := strings.Replace(string(b), "snapshot_chunk_rows: 20000", "snapshot_chunk_rows: "+strconv.Itoa(n), 1)
	if text == string(b) {
		w.t.Fatal("the pipeline config has no snapshot_chunk_rows: 20000 to replace")
	}
	if err := os.WriteFile(w.config, []byte(text), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if w.cfg, err = w.loadConfig(); err != nil {
		w.t.Fatal(err)
	}
}

// setParallelism rewrites the pipeline's config with source.snapshot_parallelism n (before any
// worker or starter reads it).
func (w *workloadPipeline) setParallelism(n int) {
	w.t.Helper()
	b, err := os.ReadFile(w.config)
	if err != nil {
		w.t.Fatal(err)
	}
	text := strings.Replace(string(b), "snapshot_chunk_rows: ", "snapshot_parallelism: "+strconv.Itoa(n)+"\n  snapshot_chunk_rows: ", 1)
	if err := os.WriteFile(w.config, []byte(text), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if w.cfg, err = w.loadConfig(); err != nil {
		w.t.Fatal(err)
	}
}

// tableName is the batch.TableName of a workload table.
func (w *workloadPipeline) tableName(tb *workload.Table) batch.TableName {
	return batch.TableName{Schema: "public", Name: tb.Name}
}

// waitStreams waits until every workload table streams (its backfill is over), with a deadline
// generous enough for a loaded machine (CI runs four of these tests at once on two cores).
func (w *workloadPipeline) waitStreams() {
	w.t.Helper()
	for _, tb := range w.gen.Tables() {
		w.waitStreaming(w.tableName(tb))
	}
}

// waitStreaming waits until a run of tn started since w.started streams with a position.
func (w *workloadPipeline) waitStreaming(tn batch.TableName) {
	w.t.Helper()
	err := localrun.WaitFor(context.Background(), "table "+tn.String()+" to finish its backfill", 6*time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, w.temporal, w.name, tn, w.started)
			if err != nil {
				return false, "", err
			}
			return st.Phase == workflows.StateStream && st.HasPosition,
				fmt.Sprintf("phase %s rows %d snapshot %+v error %q", st.Phase, st.Rows, st.Backfill, st.LastError), nil
		})
	if err != nil {
		w.t.Fatalf("workload seed %d: %v", w.gen.Seed(), err)
	}
}

// waitConverged waits until every workload table of the sink equals the source key by key:
// nothing missing, extra, stale or duplicated. The failure names the seed and the first
// differences.
func (w *workloadPipeline) waitConverged() {
	w.t.Helper()
	for _, tb := range w.gen.Tables() {
		var last workload.Report
		err := localrun.WaitFor(context.Background(), w.sink.Name()+" "+tb.Name+" to equal the source", 4*time.Minute, 2*time.Second,
			func(ctx context.Context) (bool, string, error) {
				r, err := w.gen.Check(ctx, w.sink, tb, 5)
				if err != nil {
					return false, "", err
				}
				last = r
				return r.Equal(), r.String(), nil
			})
		if err != nil {
			// The last poll may have been cut by the deadline: show the last comparison too.
			w.t.Fatalf("workload seed %d: %v; last comparison: %s", w.gen.Seed(), err, last)
		}
		w.t.Log(last)
	}
}

// workloadSize scales the rows of a test to the sink: gocaves writes about 5,000 documents a
// second, so Couchbase gets about a fifth.
func workloadSize(sinkName string, n int) int {
	if sinkName == "couchbase" {
		return max(n/5, 1)
	}
	return n
}

// TestWorkloadConvergesOnEverySink backfills a seeded initial state, then runs the seeded
// workload (inserts, updates, deletes, key changes, rows moving between partitions, partitions
// created and attached, multi-table transactions, one large transaction, updates leaving
// TOASTed values unchanged, on native, extension and other text-carried types) while the
// pipeline streams; every table of every sink ends equal to the source key by key, every
// column compared.
func TestWorkloadConvergesOnEverySink(t *testing.T) {
	defer parallel(t)()
	for _, sinkName := range workloadSinks {
		t.Run(sinkName, func(t *testing.T) {
			defer parallelBusy(t)()
			w := newWorkloadPipeline(t, sinkName, 2000, map[string]int{
				"wl_items": workloadSize(sinkName, 3000), "wl_lines": workloadSize(sinkName, 2000), "wl_docs": workloadSize(sinkName, 200),
				"wl_types": workloadSize(sinkName, 300), "wl_parts": workloadSize(sinkName, 1000)})
			worker := w.worker("worker")
			w.sluice("start")
			w.waitStreams()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := w.gen.Run(ctx, workload.RunOptions{Ops: 300, LargeTxRows: workloadSize(sinkName, 20000)}); err != nil {
				t.Fatal(err)
			}
			t.Logf("workload seed %d: %s", w.gen.Seed(), w.gen.Stats())
			w.waitConverged()

			// The checker can fail on this sink: with the worker stopped, change the source
			// behind the pipeline's back and expect exactly those differences.
			if err := worker.Stop(); err != nil {
				t.Fatal(err)
			}
			w.exec("UPDATE public.wl_docs SET title = 'checker probe' WHERE id = (SELECT min(id::text)::uuid FROM public.wl_docs)",
				"DELETE FROM public.wl_lines WHERE (order_id, line) = (SELECT order_id, line FROM public.wl_lines ORDER BY 1, 2 LIMIT 1)",
				"UPDATE public.wl_types SET c_hstore = coalesce(c_hstore, '') || 'probe=>1' WHERE id = (SELECT min(id) FROM public.wl_types)",
				"INSERT INTO public.wl_parts (id, part, name) VALUES (-1, 0, 'checker probe')")
			for _, probe := range []struct {
				table string
				kind  workload.DiffKind
			}{{"wl_docs", workload.Stale}, {"wl_lines", workload.Extra}, {"wl_types", workload.Stale}, {"wl_parts", workload.Missing}} {
				r, err := w.gen.Check(ctx, w.sink, w.gen.Table(probe.table), 5)
				if err != nil {
					t.Fatal(err)
				}
				if len(r.First) != 1 || r.First[0].Kind != probe.kind {
					t.Errorf("after changing one row of %s behind the pipeline, the checker reports %s; want one %s key", probe.table, r, probe.kind)
				}
			}
		})
	}
}

// The backfilled table of TestHeavyWritesDuringBackfill and its chunks (a fifth on Couchbase).
const heavyRows, heavyChunkRows = 20000, 1000

// TestHeavyWritesDuringBackfill (issue 8, fault 7): the workload writes as fast as it can from
// before the snapshot starts until after it ends, on a table big enough for a backfill of many
// chunks; every sink ends exactly equal to the source, with no key visible twice.
func TestHeavyWritesDuringBackfill(t *testing.T) {
	defer parallel(t)()
	for _, sinkName := range workloadSinks {
		t.Run(sinkName, func(t *testing.T) {
			defer parallelBusy(t)()
			w := newWorkloadPipeline(t, sinkName, workloadSize(sinkName, heavyChunkRows), map[string]int{
				"wl_items": workloadSize(sinkName, heavyRows), "wl_lines": workloadSize(sinkName, 3000), "wl_docs": workloadSize(sinkName, 200),
				"wl_types": workloadSize(sinkName, 300), "wl_parts": workloadSize(sinkName, 1000)})
			w.setParallelism(3) // integer-keyed tables are copied in key ranges, three at once
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.gen.Run(ctx, workload.RunOptions{MaxRowsPerOp: workloadSize(sinkName, 20)}) }()
			stopped := false
			stop := func() error {
				if stopped {
					return nil
				}
				stopped = true
				cancel()
				return <-done
			}
			t.Cleanup(func() { _ = stop() })
			ops := func() int { return w.gen.Stats().Ops }
			waitOps := func(n int, why string) {
				t.Helper()
				err := localrun.WaitFor(context.Background(), why, 2*time.Minute, 100*time.Millisecond,
					func(context.Context) (bool, string, error) {
						select {
						case err := <-done:
							stopped = true
							return false, "", fmt.Errorf("the workload stopped: %v", err)
						default:
						}
						return ops() >= n, fmt.Sprintf("%d ops", ops()), nil
					})
				if err != nil {
					t.Fatal(err)
				}
			}
			waitOps(20, "the workload to write before the snapshot starts")
			before := ops()
			w.worker("worker")
			started := time.Now()
			w.sluice("start")
			w.waitStreams()
			took, during := time.Since(started), ops()-before
			waitOps(ops()+50, "the workload to write after the backfill")
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			t.Logf("workload seed %d: backfill of %d rows took %s while the workload ran %d operations; in all %s",
				w.gen.Seed(), workloadSize(sinkName, heavyRows), took.Round(time.Millisecond), during, w.gen.Stats())
			w.waitConverged()
		})
	}
}

// snapshotSession describes the snapshot of table's current run: the run, the process id of
// the worker holding its session (from the session's pending activities) and whether a
// CopyChunk is in flight.
func (w *workloadPipeline) snapshotSession(ctx context.Context, tn batch.TableName) (runID string, pid int, copying bool, err error) {
	desc, err := w.temporal.DescribeWorkflowExecution(ctx, workflows.TableWorkflowID(w.name, tn), "")
	if err != nil {
		return "", 0, false, err
	}
	runID = desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	for _, a := range desc.GetPendingActivities() {
		name := a.GetActivityType().GetName()
		if name == "CopySnapshot" || name == "CopyChunk" {
			copying = true
		}
		if (name == "CopySnapshot" || name == "CopyChunk" || strings.Contains(name, "SessionCreation")) && a.GetLastWorkerIdentity() != "" &&
			a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			if pid, err = workerPID(a.GetLastWorkerIdentity()); err != nil {
				return "", 0, false, err
			}
		}
	}
	return runID, pid, copying, nil
}

// runFailure returns the failure (type: message) a closed run of table ended with ("" while
// it runs).
func (w *workloadPipeline) runFailure(ctx context.Context, tn batch.TableName, runID string) (string, error) {
	it := w.temporal.GetWorkflowHistory(ctx, workflows.TableWorkflowID(w.name, tn), runID, false,
		enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", err
		}
		if a := ev.GetWorkflowExecutionFailedEventAttributes(); a != nil {
			return a.GetFailure().GetApplicationFailureInfo().GetType() + ": " + a.GetFailure().GetMessage(), nil
		}
		// A failed run that its retry policy restarts closes as continued-as-new carrying the
		// failure (server 1.29 leaves the initiator unset).
		if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil && a.GetFailure() != nil {
			return a.GetFailure().GetApplicationFailureInfo().GetType() + ": " + a.GetFailure().GetMessage(), nil
		}
		return fmt.Sprintf("closed as %s: %v", ev.GetEventType(), ev.GetAttributes()), nil
	}
	return "", nil
}

// backfillsAgain reports whether run runID of the table's workflow began a second backfill (a
// second DiscardSnapshot), as a run does after its snapshot session is lost.
func (w *workloadPipeline) backfillsAgain(ctx context.Context, tn batch.TableName, runID string) (bool, error) {
	it := w.temporal.GetWorkflowHistory(ctx, workflows.TableWorkflowID(w.name, tn), runID, false,
		enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	discards := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return false, err
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "DiscardSnapshot" {
			discards++
		}
	}
	return discards >= 2, nil
}

// TestWorkerKilledDuringBackfill (issue 8, fault 6): the worker holding a table's snapshot
// session is SIGKILLed while the backfill is partly committed; the run's session is lost and the
// run backfills again from a new snapshot, and no row of the partial snapshot survives:
// rows the partial snapshot had written are deleted in the source after the kill, so a
// surviving one would show as extra. It runs on every sink, and on Iceberg through a real REST
// catalog on S3 with credentials (examples/iceberg-s3.yaml on devstack's weed), read back
// through that catalog (issue 18).
func TestWorkerKilledDuringBackfill(t *testing.T) {
	defer parallel(t)()
	for _, sinkName := range append(workloadSinks[:len(workloadSinks):len(workloadSinks)], "iceberg-rest") {
		t.Run(sinkName, func(t *testing.T) {
			defer parallelBusy(t)()
			chunk := workloadSize(sinkName, 1000)
			w := newWorkloadPipeline(t, sinkName, chunk, map[string]int{
				"wl_items": workloadSize(sinkName, 20000), "wl_lines": workloadSize(sinkName, 1000), "wl_docs": workloadSize(sinkName, 100),
				"wl_types": workloadSize(sinkName, 100), "wl_parts": workloadSize(sinkName, 500)})
			w.setConfig("  max_rows: 5000\n", "  max_rows: 5000\n  max_bytes: 64KiB\n") // a sink write of the backfill holds a chunk or two
			items := w.gen.Table("wl_items")
			tn := w.tableName(items)
			// The only worker hangs its copy after the third sink write of the table's snapshot
			// (fault point snapshot.after-write), holding the session: the kill then lands on a
			// partly written snapshot, whatever the machine's speed.
			workers := []*localrun.Worker{w.workerEnv("worker1", fmt.Sprintf("%s=%s:hang@3:%s", faults.EnvVar, faults.SnapshotAfterWrite, tn))}
			w.sluice("start")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var st workflows.TableStatus
			var runID string
			var holder int
			err := localrun.WaitFor(ctx, "the snapshot's copy to hang after its third write", 3*time.Minute, 250*time.Millisecond,
				func(ctx context.Context) (bool, string, error) {
					var err error
					if st, err = localrun.TableStatus(ctx, w.temporal, w.name, tn, w.started); err != nil {
						return false, "", err
					}
					var copying bool
					if runID, holder, copying, err = w.snapshotSession(ctx, tn); err != nil {
						return false, "", err
					}
					log, err := os.ReadFile(workers[0].Log)
					if err != nil {
						return false, "", err
					}
					hung := strings.Contains(string(log), "fault injected: this copy hangs")
					return hung && copying && holder != 0, fmt.Sprintf("hung %v copying %v holder %d", hung, copying, holder), nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if st.Phase != workflows.StateBackfill || (st.Backfill != nil && st.Backfill.Done) {
				t.Fatalf("the backfill is not in progress when the worker is killed: phase %s, %+v", st.Phase, st.Backfill)
			}
			partial, err := w.sink.Read(ctx, items, w.gen.Universe(items.Name))
			if err != nil {
				t.Fatal(err)
			}
			if len(partial) == 0 || len(partial) >= len(w.gen.Live(items.Name)) {
				t.Fatalf("the sink holds %d of %d rows when the worker is killed; want a partial snapshot", len(partial), len(w.gen.Live(items.Name)))
			}

			killed := false
			for _, wk := range workers {
				if wk.PID() == holder {
					if err := wk.Kill(); err != nil {
						t.Fatal(err)
					}
					killed = true
				}
			}
			if !killed {
				t.Fatalf("no worker of this test holds the snapshot session (pid %d)", holder)
			}
			w.worker("worker3")

			// Delete half of what the partial snapshot wrote, and keep writing.
			var gone []workload.Key
			for i, r := range partial {
				if i%2 == 0 {
					gone = append(gone, r.Key)
				}
			}
			if err := w.gen.Delete(ctx, items.Name, gone); err != nil {
				t.Fatal(err)
			}
			if err := w.gen.Run(ctx, workload.RunOptions{Ops: 100}); err != nil {
				t.Fatal(err)
			}
			// The run that held the killed snapshot backfills again after its session is lost:
			// a second DiscardSnapshot in the same run (it used to fail the run, SnapshotSessionLost,
			// and a new run re-snapshotted; a failure now means something else went wrong).
			var failure string
			err = localrun.WaitFor(context.Background(), "the killed snapshot's run to backfill again", 3*time.Minute, time.Second,
				func(ctx context.Context) (bool, string, error) {
					var err error
					if failure, err = w.runFailure(ctx, tn, runID); err != nil || failure != "" {
						return failure != "", "", err
					}
					again, err := w.backfillsAgain(ctx, tn, runID)
					return again, "one backfill so far", err
				})
			if err != nil {
				t.Fatal(err)
			}
			if failure != "" {
				t.Fatalf("the run holding the killed snapshot ended with %q, want it to backfill again", failure)
			}
			// The same run backfills again: it streams once the new snapshot is in.
			w.waitStreaming(tn)
			t.Logf("workload seed %d: killed pid %d with %d of %d rows snapshotted; deleted %d of them; run %s backfills again",
				w.gen.Seed(), holder, len(partial), len(w.gen.Live(items.Name)), len(gone), runID)
			w.waitConverged()
		})
	}
}
