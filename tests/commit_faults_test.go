package tests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/faults"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/testkit/localrun"
)

// The commit-fault pipelines backfill commitFaultSeed rows; their live writes insert ids from
// commitFaultBase on, commitFaultInserts per round, for at most commitFaultRounds rounds.
const (
	commitFaultSeed    = 2000
	commitFaultBase    = 500000
	commitFaultInserts = 10
	commitFaultRounds  = 1000
)

// commitFaultPass is the pass of the armed point (the armed worker's Nth commit of the stream)
// at which the worker kills itself.
const commitFaultPass = 2

// commitFaultUniverse is every id a commit-fault pipeline's source can ever hold.
func commitFaultUniverse() []string {
	return keys([2]int{1, commitFaultSeed}, [2]int{commitFaultBase, commitFaultBase + commitFaultRounds*commitFaultInserts - 1})
}

// commitFaultPipeline opens a pipeline of public.items (commitFaultSeed rows) into dest and
// returns the reader that shows the target as a user of the sink sees it, over e2eColumns.
func commitFaultPipeline(t *testing.T, dest destination) (*icebergPipeline, sinkReader) {
	t.Helper()
	target := dest.target("items")
	p := newPipeline(t, "", dest.yaml, []string{"public.items:" + target}, itemsDDL, itemsSeed(1, commitFaultSeed))
	return p, dest.read(p, target, e2eColumns, commitFaultUniverse())
}

// icebergColumnsReader reads columns of target, keyed by id, from the pipeline's Iceberg sink.
func icebergColumnsReader(p *icebergPipeline, target string, columns []string) sinkReader {
	return func(ctx context.Context) (localrun.Table, error) {
		got, err := localrun.ScanIceberg(ctx, p.cfg, target, "id", append([]string{"id"}, columns...))
		if err != nil {
			return localrun.Table{}, err
		}
		out := localrun.Table{Columns: columns, Rows: map[string][]string{}}
		for k, r := range got.Rows {
			out.Rows[k] = r[1:]
		}
		return out, nil
	}
}

// commitFaultWriter writes rounds of inserts, updates and deletes to the source until stop
// (or commitFaultRounds rounds). A failed statement ends it and fails the test at stop.
type commitFaultWriter struct {
	cancel     context.CancelFunc
	done       chan error
	writeCount // rounds written
}

func startCommitFaultWriter(p *icebergPipeline) *commitFaultWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &commitFaultWriter{cancel: cancel, done: make(chan error, 1)}
	go func() {
		defer w.finish()
		var err error
		for i := 0; i < commitFaultRounds && err == nil && ctx.Err() == nil; i++ {
			lo := commitFaultBase + i*commitFaultInserts
			err = execSQL(ctx, p.dsn,
				itemsSeed(lo, lo+commitFaultInserts-1),
				fmt.Sprintf(`UPDATE public.items SET qty = coalesce(qty, 0) + 1, name = name || '+' WHERE id %% 37 = %d`, i%37),
				fmt.Sprintf(`DELETE FROM public.items WHERE id BETWEEN %d AND %d OR id = %d`, 1+i*2, 2+i*2, lo-commitFaultInserts+3))
			if err == nil {
				w.add()
			}
			pace(ctx, 150*time.Millisecond)
		}
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = nil
		}
		w.done <- err
	}()
	return w
}

func (w *commitFaultWriter) stop(t *testing.T) {
	t.Helper()
	w.cancel()
	if err := <-w.done; err != nil {
		t.Fatalf("live writes: %v", err)
	}
}

// waitKilledAt waits until w has SIGKILLed itself at point: its log holds the fault's line and
// the process is gone. A worker that never reaches the point fails the test, so a fault test
// cannot pass without its crash.
func waitKilledAt(t *testing.T, w *localrun.Worker, point faults.Point) {
	t.Helper()
	err := localrun.WaitFor(context.Background(), "the armed worker to kill itself at "+string(point), 3*time.Minute, 250*time.Millisecond,
		func(context.Context) (bool, string, error) {
			b, err := os.ReadFile(w.Log)
			if err != nil {
				return false, "", err
			}
			log := string(b)
			if !strings.Contains(log, "TESTING FAULTS ARMED") {
				return false, "", fmt.Errorf("the armed worker did not warn that faults are armed")
			}
			fired := strings.Contains(log, "fault injected") && strings.Contains(log, "point="+string(point))
			alive := syscall.Kill(w.PID(), 0) == nil
			return fired && !alive, fmt.Sprintf("fault line logged: %v, process alive: %v", fired, alive), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// armedWorker starts the pipeline's only worker, armed to kill itself at the commitFaultPass-th
// pass of point for public.items, starts the pipeline, waits for the backfill, starts the live
// writes, waits for the crash and starts an unarmed worker, which takes over the crashed commit.
// It returns, with the writes still running, once the table's committed position has moved past
// the WAL written before the crash, or its run failed (then with the failure).
func armedWorker(t *testing.T, p *icebergPipeline, point faults.Point) (*commitFaultWriter, string) {
	t.Helper()
	armed := p.workerEnv("armed", fmt.Sprintf("%s=%s:kill@%d:public.items", faults.EnvVar, point, commitFaultPass))
	p.sluice("start")
	p.waitStream(itemsTable)
	w := startCommitFaultWriter(p)
	waitKilledAt(t, armed, point)
	crashedAt := p.currentLSN(context.Background())
	checkCrashState(t, p, armed, point)
	p.worker("rescuer")
	return w, waitCommittedPast(t, p, crashedAt)
}

// checkCrashState reads the batch the armed worker crashed on from its log line and checks, with
// no worker running, that the sink and the staging store are in the state the point says: before
// the write, the sink's position is below the batch's hi and the file is staged; after the
// write, the position covers hi and the file is still staged; after the mutation, the position
// is below hi and the file is gone.
func checkCrashState(t *testing.T, p *icebergPipeline, armed *localrun.Worker, point faults.Point) {
	t.Helper()
	b, err := os.ReadFile(armed.Log)
	if err != nil {
		t.Fatal(err)
	}
	line := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "fault injected") {
			line = l
		}
	}
	field := func(name string) string {
		m := regexp.MustCompile(`\b` + name + `=("[^"]*"|\S+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("the crash line names no %s: %q", name, line)
		}
		return strings.Trim(m[1], `"`)
	}
	hi, err := batch.ParsePosition(field("hi"))
	if err != nil {
		t.Fatalf("hi in the crash line %q: %v", line, err)
	}
	file := strings.TrimPrefix(field("uri"), "file://")
	_, statErr := os.Stat(file)
	staged := statErr == nil
	if statErr != nil && !errors.Is(statErr, os.ErrNotExist) {
		t.Fatal(statErr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink, err := pipeline.Open(ctx, p.cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())
	pos, ok, err := sink.Position(ctx, sinks.TableSpec{Target: p.cfg.Tables[0].Target, Schema: batch.Schema{Table: itemsTable}})
	if err != nil {
		t.Fatalf("reading the committed position at the crash: %v", err)
	}
	written := ok && !pos.Position.Less(hi)
	t.Logf("worker %d killed itself at %s on batch %s: sink position %s, staged file present: %v",
		armed.PID(), point, field("batch"), pos.Position, staged)
	want, known := map[faults.Point]struct{ written, staged bool }{
		faults.CommitBeforeWrite:    {written: false, staged: true},
		faults.CommitAfterWrite:     {written: true, staged: true},
		faults.CommitAckBeforeWrite: {written: false, staged: false},
	}[point]
	if !known {
		t.Fatalf("no expected state for point %s", point)
	}
	wantWritten, wantStaged := want.written, want.staged
	if written != wantWritten || staged != wantStaged {
		t.Fatalf("at %s the sink holds the batch (position %s, hi %s): %v, want %v; its file is staged: %v, want %v",
			point, pos.Position, hi, written, wantWritten, staged, wantStaged)
	}
}

// waitCommittedPast waits until the table's running workflow reports a committed position past
// lsn, or its run failed, and returns the run's failure ("" when it did not fail).
func waitCommittedPast(t *testing.T, p *icebergPipeline, lsn uint64) string {
	t.Helper()
	var failure string
	err := localrun.WaitFor(context.Background(), "the table to commit past the crash", 3*time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			if failure, _ = tableFailed(ctx, p); failure != "" {
				return true, "", nil
			}
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, itemsTable, p.started)
			if err != nil {
				return false, err.Error(), nil
			}
			return st.Position.Position.LSN > lsn, fmt.Sprintf("position %s, queue %d, error %q", st.Position.Position, st.QueueLength, st.LastError), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return failure
}

// tableFailed returns the failure of public.items' workflow when its latest run failed, or "".
func tableFailed(ctx context.Context, p *icebergPipeline) (string, error) {
	werr, err := p.failedRunError(ctx, itemsTable)
	if err != nil || werr == nil {
		return "", err
	}
	return werr.Error(), nil
}

// TestWorkerKilledAtCommitPoints SIGKILLs a worker at precise points of a commit, on Iceberg,
// ClickHouse and Couchbase: just before the sink write of its second commit of the stream, and
// just after that write, before the staged file is acknowledged. Live inserts, updates and
// deletes run throughout; an unarmed worker takes over the crashed commit. The sink then equals
// the source key by key, with no key visible twice (issue 8, fault 1).
func TestWorkerKilledAtCommitPoints(t *testing.T) {
	defer parallel(t)()
	points := []faults.Point{faults.CommitBeforeWrite, faults.CommitAfterWrite}
	for _, sink := range everySink() {
		for _, point := range points {
			t.Run(sink.name+"/"+string(point), func(t *testing.T) {
				defer parallel(t)()
				killedAtCommitPoint(t, sink.dest(t), point)
			})
		}
	}
}

// killedAtCommitPoint runs the commit-point scenario into dest: a worker armed to SIGKILL itself
// at point during a commit, a rescuer worker, live changes throughout; the table must not stop,
// and the sink must equal the source key by key.
func killedAtCommitPoint(t *testing.T, dest destination, point faults.Point) {
	t.Helper()
	p, read := commitFaultPipeline(t, dest)
	w, failure := armedWorker(t, p, point)
	if failure != "" {
		w.stop(t)
		t.Fatalf("the table stopped after the crash at %s: %s", point, failure)
	}
	w.stop(t)
	p.waitEqualTo("public.items", "id", e2eColumns, read)
}

// TestBrokenCommitPathIsCaught proves the commit-fault test can fail: the same scenario on
// Iceberg, with the commit path broken on purpose (the mutation commit.ack-before-write: the
// staged batch is acknowledged, then the worker dies before the sink write), must leave rows
// the checker finds missing.
//
// The real path survives the same crash because it writes the batch's rows and its position to
// the sink in one atomic commit before it acknowledges the staged file: a crash before the write
// leaves the file staged and the sink's position below the batch, so the retried commit reads the
// file again and applies it; a crash after the write leaves the position at the batch's end, so
// the retry finds the batch covered and only acknowledges it; and the slot is never confirmed past
// a batch that is still staged. The mutation deletes the only copy of the batch before the sink
// holds it, so no retry can bring its rows back (the retry finds neither the rows in the sink nor
// the staged file, and the table stops with StagedBatchMissing).
func TestBrokenCommitPathIsCaught(t *testing.T) {
	defer parallel(t)()
	p, read := commitFaultPipeline(t, icebergDestination(t))
	w, failure := armedWorker(t, p, faults.CommitAckBeforeWrite)

	// Wait for the end state: the table's run failed, or it never will and the sink settles.
	// Converging to the source would mean the fault tests cannot see a lost batch.
	converged := false
	err := localrun.WaitFor(context.Background(), "the broken commit to stop the table", 2*time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			if failure != "" {
				return true, "", nil
			}
			f, err := tableFailed(ctx, p)
			if err != nil || f != "" {
				failure = f
				return f != "", "", err
			}
			src, err := sourceDBs.Scan(ctx, p.dsn, "public.items", "id", e2eColumns)
			if err != nil {
				return false, "", err
			}
			got, err := read(ctx)
			if err != nil {
				return false, "", err
			}
			if len(localrun.Diff(src, got, 1)) == 0 {
				converged = true
				return true, "", nil
			}
			return false, "running, sink differs from source", nil
		})
	if converged {
		w.stop(t)
		t.Fatal("the sink equals the source after a batch was acknowledged and never written: the checker cannot see lost rows")
	}
	w.stop(t)
	if failure == "" {
		// The table still runs: let it commit everything written, so what is missing is lost,
		// not late.
		lsn := p.currentLSN(context.Background())
		p.exec(`UPDATE public.items SET name = name WHERE id = (SELECT max(id) FROM public.items)`)
		failure = waitCommittedPast(t, p, lsn)
	}
	t.Logf("table run: failed with %q (wait: %v)", failure, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, err := sourceDBs.Scan(ctx, p.dsn, "public.items", "id", e2eColumns)
	if err != nil {
		t.Fatal(err)
	}
	got, err := read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	diff := localrun.Diff(src, got, 1<<30)
	missing := 0
	for _, d := range diff {
		if strings.Contains(d, "missing in sink") {
			missing++
		}
	}
	t.Logf("the checker finds %d differences, %d rows missing in the sink; first: %v", len(diff), missing, diff[:min(len(diff), 5)])
	if missing == 0 {
		t.Fatalf("the mutation lost no row the checker can see: %d differences %v", len(diff), diff[:min(len(diff), 5)])
	}

	// Sluice itself must not skip the lost batch silently: the table stops with
	// StagedBatchMissing, `sluice resume` is refused (a new run would go on after the lost batch),
	// and `sluice resync`, which the error names, backfills the table until it equals the source.
	if !strings.Contains(failure, "StagedBatchMissing") || !strings.Contains(failure, "sluice resync --table public.items") {
		t.Fatalf("the table did not stop with a StagedBatchMissing error naming the resync: %q", failure)
	}
	out, err := localrun.Sluice(ctx, bins.Starter, p.env, "resume", "--table", "public.items", "--config", p.config)
	if err == nil || !strings.Contains(err.Error()+out, "sluice resync --table public.items") {
		t.Fatalf("sluice resume after StagedBatchMissing: err %v, output %q; want a refusal naming sluice resync", err, out)
	}
	t.Logf("sluice resume refused: %v", err)
	p.started = time.Now().Add(-time.Second)
	t.Logf("sluice resync: %s", p.sluice("resync", "--table", "public.items"))
	p.waitStream(itemsTable)
	p.waitEqualTo("public.items", "id", e2eColumns, read)
}
