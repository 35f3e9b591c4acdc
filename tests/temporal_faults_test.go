package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/netfault"
	"github.com/sluicecdc/sluice/testkit/testenv"
	"github.com/sluicecdc/sluice/workflows"
)

// startProxy puts a netfault proxy in front of target, served until cleanup.
func startProxy(t *testing.T, target string) *netfault.Proxy {
	t.Helper()
	px, err := netfault.New(target)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := px.Serve(context.Background()); err != nil {
			t.Errorf("proxy to %s: %v", target, err)
		}
	})
	t.Cleanup(func() { _ = px.Close(); wg.Wait() })
	return px
}

// liveWriter writes to the pipeline's source in rounds (inserts, updates, deletes) until stop
// is called, which returns the number of rounds. A round whose statement fails ends the writer
// (the comparison is with what the source holds afterwards).
type liveWriter struct {
	cancel     context.CancelFunc
	done       chan int
	writeCount // rounds written
}

// startWriting starts a liveWriter on p's source; key ranges from base on are its own.
func startWriting(p *icebergPipeline, base int) *liveWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &liveWriter{cancel: cancel, done: make(chan int, 1)}
	go func() {
		defer w.finish()
		i := 0
		for ; ctx.Err() == nil; i++ {
			lo := base + i*200
			if err := execSQL(ctx, p.dsn,
				itemsSeed(lo, lo+199),
				roundUpdate(i, base, lo, 2000),
				fmt.Sprintf(`DELETE FROM public.items WHERE id BETWEEN %d AND %d`, lo-190, lo-181)); err != nil {
				break
			}
			w.add()
			pace(ctx, 150*time.Millisecond)
		}
		w.done <- i
	}()
	return w
}

func (w *liveWriter) stop() int {
	w.cancel()
	return <-w.done
}

// pendingCommit returns the table's pending CommitBatch activity, if any.
func pendingCommit(ctx context.Context, p *icebergPipeline) (*workflowpb.PendingActivityInfo, error) {
	return pendingActivity(ctx, p, workflows.TableWorkflowID(p.name, itemsTable), "CommitBatch")
}

// commitCutMidway waits until the table's CommitBatch runs on the worker and cuts the
// worker's connection to Temporal at once. It returns the connections closed and whether the
// commit was still running (pending, started) right after the cut: a commit that finished in
// between can report nothing, so the caller restores and tries again.
func commitCutMidway(t *testing.T, p *icebergPipeline, px *netfault.Proxy) (int, bool) {
	t.Helper()
	var cut int
	err := localrun.WaitFor(context.Background(), "a CommitBatch to run on the worker", 2*time.Minute, 20*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			a, err := pendingCommit(ctx, p)
			if err != nil || a == nil || a.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
				return false, "no CommitBatch started", err
			}
			cut = px.Cut()
			return true, "", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := pendingCommit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return cut, a != nil && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED
}

// waitReconnected waits until a client holds a connection through px again.
func waitReconnected(t *testing.T, px *netfault.Proxy) {
	t.Helper()
	err := localrun.WaitFor(context.Background(), "the worker to reconnect through the proxy", 2*time.Minute, 200*time.Millisecond,
		func(context.Context) (bool, string, error) {
			return px.Live() > 0, fmt.Sprintf("stats %+v", px.Stats()), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// waitSinkEqual waits until read shows the source's items over columns, key by key. Its
// deadline is longer than waitEqual's: after a lost session the reader's new attempt waits for
// the old one (still on the worker until it learns it timed out) to let go of the slot.
func waitSinkEqual(p *icebergPipeline, read sinkReader, columns []string) {
	p.t.Helper()
	p.waitEqualWithin(6*time.Minute, "public.items", "id", columns, read)
}

// logReaderRecovery logs how the reader came back: its activity's attempt and last failure,
// and the worker's log lines about the slot being held.
func logReaderRecovery(t *testing.T, p *icebergPipeline, workerLog string) {
	t.Helper()
	desc, err := p.temporal.DescribeWorkflowExecution(context.Background(), workflows.SourceWorkflowID(p.name), "")
	if err == nil {
		for _, a := range desc.GetPendingActivities() {
			t.Logf("pending %s: attempt %d, state %s, last failure %q", a.GetActivityType().GetName(), a.GetAttempt(), a.GetState(), a.GetLastFailure().GetMessage())
		}
	}
	b, err := os.ReadFile(workerLog)
	if err != nil {
		return
	}
	held := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "is active for PID") {
			held++
		}
	}
	t.Logf("worker log: %d lines saying the slot was still held", held)
}

// TestWorkerLosesTemporalConnectionWithBatchesInFlight cuts the only worker's connection to the
// Temporal frontend (a TCP proxy in front of the real server, given to the worker alone through
// SLUICE_TEMPORAL_ADDRESS) while a CommitBatch runs on it and the source keeps being written,
// until the server has timed out both the commit and the reader (their heartbeat timeouts, 10 s,
// ShortHeartbeat). The server schedules the in-flight commit again (the test sees attempt > 1
// with a heartbeat timeout); when the connection is restored the same worker reconnects, the batches it had been
// delivered but not acked are redelivered and committed (or skipped as covered), the reader
// resumes from the slot, and the sink equals the source key by key.
func TestWorkerLosesTemporalConnectionWithBatchesInFlight(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			dest := sk.dest(t)
			target := dest.target("items")
			p := newPipeline(t, "", dest.yaml, []string{"public.items:" + target}, itemsDDL, itemsSeed(1, 5000))
			waitEqual := func(p *icebergPipeline) {
				// Every key the source ever held (Couchbase cannot list them): the seed, the
				// writer's rounds (from 1000000 up to the highest key it inserted) and
				// liveItemChanges' inserts and moved key.
				waitSinkEqual(p, func(ctx context.Context) (localrun.Table, error) {
					var top int
					if err := p.queryRow(ctx, `SELECT coalesce(max(id), 0) FROM public.items WHERE id >= 1000000`, &top); err != nil {
						return localrun.Table{}, err
					}
					universe := keys([2]int{1, 5000}, [2]int{1000000, top}, [2]int{200001, 200500}, [2]int{900000, 900000})
					return dest.read(p, target, dest.items, universe)(ctx)
				}, dest.items)
			}
			px := startProxy(t, testenv.Temporal(t))
			wk := p.workerEnv("worker", "SLUICE_TEMPORAL_ADDRESS="+px.Addr())
			p.sluice("start")
			p.waitStream(itemsTable)
			if px.Live() == 0 {
				t.Fatal("the worker streams but holds no connection through the proxy: it does not use SLUICE_TEMPORAL_ADDRESS")
			}

			// The writer's keys start above every key liveItemChanges writes (200001-200500, 900000),
			// however many rounds the cuts take.
			w := startWriting(p, 1000000)
			// How long a cut may last at most before both timeouts below show: the commit's
			// and the reader's heartbeat timeouts (10 s) and their retries' first backoff.
			const hold = 40 * time.Second
			var retried string
			for try := 1; retried == ""; try++ {
				reading, err := p.readerAttempt(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				cut, inFlight := commitCutMidway(t, p, px)
				cutAt := time.Now()
				t.Logf("try %d: cut %d connections, commit still running after the cut: %v", try, cut, inFlight)
				if cut == 0 {
					t.Fatal("the cut closed no connection")
				}
				if !inFlight && try < 5 {
					// The commit was acknowledged just before the cut: with the worker cut off no
					// other can start. Restore and try again.
					px.Restore()
					waitReconnected(t, px)
					continue
				}
				// The server must time the in-flight commit out and schedule it again.
				err = localrun.WaitFor(context.Background(), "CommitBatch to be timed out and rescheduled while the worker is cut off", hold, time.Second,
					func(ctx context.Context) (bool, string, error) {
						a, err := pendingCommit(ctx, p)
						if err != nil || a == nil {
							return false, "no pending CommitBatch", err
						}
						if a.GetAttempt() > 1 && a.GetLastFailure() != nil {
							retried = fmt.Sprintf("attempt %d, state %s, last failure %q", a.GetAttempt(), a.GetState(), a.GetLastFailure().GetMessage())
							return true, "", nil
						}
						return false, fmt.Sprintf("attempt %d state %s", a.GetAttempt(), a.GetState()), nil
					})
				if err != nil {
					t.Fatal(err)
				}
				// And the reader's: the session stays down until the server has timed out the
				// worker's reader too.
				err = localrun.WaitFor(context.Background(), "ReadStream to be timed out while the worker is cut off", time.Until(cutAt.Add(hold)), time.Second,
					func(ctx context.Context) (bool, string, error) {
						now, err := p.readerAttempt(ctx)
						return err == nil && now != reading, now, err
					})
				if err != nil {
					t.Fatal(err)
				}
				if px.Live() != 0 {
					t.Fatalf("%d connections went through the proxy while it was cut", px.Live())
				}
				px.Restore()
				t.Logf("try %d: restored after %s; %s", try, time.Since(cutAt).Round(time.Second), retried)
			}
			if !strings.Contains(strings.ToLower(retried), "heartbeat") {
				t.Errorf("the redelivered CommitBatch failed for another reason than its heartbeat: %s", retried)
			}

			// Keep writing a little after the reconnection, then wait for the sink.
			restored := time.Now()
			waitReconnected(t, px)
			w.waitMore(t, 10, "writes go on after the reconnection")
			rounds := w.stop()
			p.exec(liveItemChanges...)
			waitEqual(p)
			t.Logf("%d write rounds; proxy %+v; equal %s after the restore", rounds, px.Stats(), time.Since(restored).Round(time.Second))
			logReaderRecovery(t, p, wk.Log)

			// The redelivered commit finished: the table streams again, with nothing pending.
			err := localrun.WaitFor(context.Background(), "the table to drain its queue", 2*time.Minute, time.Second,
				func(ctx context.Context) (bool, string, error) {
					st, err := localrun.TableStatus(ctx, p.temporal, p.name, itemsTable, p.started)
					if err != nil {
						return false, "", err
					}
					return st.Phase == workflows.StateStream && st.QueueLength == 0 && st.LastError == "",
						fmt.Sprintf("phase %s queue %d error %q", st.Phase, st.QueueLength, st.LastError), nil
				})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// workflowRun is one workflow's current run as the server describes it.
type workflowRun struct {
	id, runID, firstRunID string
	status                enumspb.WorkflowExecutionStatus
}

func describeRun(ctx context.Context, p *icebergPipeline, id string) (workflowRun, error) {
	desc, err := p.temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return workflowRun{}, err
	}
	info := desc.GetWorkflowExecutionInfo()
	return workflowRun{id: id, runID: info.GetExecution().GetRunId(), firstRunID: info.GetFirstRunId(), status: info.GetStatus()}, nil
}

// TestTemporalServerRestartMidStream stops a private Temporal dev server (its own devstack
// directory; the dev server keeps its history in a sqlite file there) while the pipeline
// streams and the source keeps being written, leaves it down 15 seconds, and starts it again on
// the same address with the same database, on every sink. The worker and the test's client
// reconnect on their own; the pipeline's workflows are the same executions (the same run, or
// runs continued from it), running, and streaming again; the sink equals the source key by key.
func TestTemporalServerRestartMidStream(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			temporalRestartMidStream(t, sk)
		})
	}
}

// temporalRestartMidStream is TestTemporalServerRestartMidStream into the sink sk opens.
func temporalRestartMidStream(t *testing.T, sk sinkKind) {
	ctx := context.Background()
	stack, tmp := privateService(t, devstack.ServiceTemporal)
	s := sk.open(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 2000)}, Temporal: tmp.Addr})
	s.know([2]int{1, 2000})
	p := s.p
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	ids := []string{workflows.SourceWorkflowID(p.name), workflows.TableWorkflowID(p.name, itemsTable)}
	before := map[string]workflowRun{}
	for _, id := range ids {
		r, err := describeRun(ctx, p, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = r
	}

	w := startRounds(p.dsn, 100000)
	w.waitMore(t, 10, "writes in flight when the server stops")
	if err := stack.Halt(ctx, devstack.ServiceTemporal); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	holdFor(t, 15*time.Second, "the Temporal server's outage, while the worker and the writes go on")
	back, err := stack.Ensure(ctx, devstack.ServiceTemporal)
	if err != nil {
		t.Fatalf("restarting the private temporal: %v", err)
	}
	if back.Addr != tmp.Addr {
		t.Fatalf("temporal came back on %s, not %s: workers configured with the old address cannot reach it", back.Addr, tmp.Addr)
	}
	if back.PID == tmp.PID {
		t.Fatalf("temporal was not restarted (same pid %d)", tmp.PID)
	}
	t.Logf("temporal down for %s", time.Since(down).Round(time.Second))
	w.waitMore(t, 10, "writes go on after the restart too")
	written, rounds := w.stop()
	s.know(written)
	s.know(liveItemKeys...)
	p.exec(liveItemChanges...)
	restarted := time.Now()
	s.waitEqual()
	t.Logf("%d write rounds; equal %s after the restart", rounds, time.Since(restarted).Round(time.Second))

	// The same executions carry on: the history survived the restart.
	for _, id := range ids {
		r, err := describeRun(ctx, p, id)
		if err != nil {
			t.Fatalf("after the restart: %v", err)
		}
		b := before[id]
		if r.status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Errorf("%s is %s after the restart", id, r.status)
		}
		if r.runID != b.runID && r.firstRunID != b.firstRunID {
			t.Errorf("%s is a new execution after the restart (run %s, first run %s; before: run %s, first run %s)",
				id, r.runID, r.firstRunID, b.runID, b.firstRunID)
		}
	}
	// And the table streams again: new writes reach the sink.
	s.know([2]int{300001, 300100})
	p.exec(itemsSeed(300001, 300100), `DELETE FROM public.items WHERE id BETWEEN 300001 AND 300010`)
	s.waitEqual()
	st, err := localrun.TableStatus(ctx, p.temporal, p.name, itemsTable, p.started)
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != workflows.StateStream || st.LastError != "" {
		t.Errorf("table after the restart: phase %s, last error %q", st.Phase, st.LastError)
	}
}
