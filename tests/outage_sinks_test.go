package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// sinkTarget is a pipeline into one sink and the reader that shows the target as a user of the
// sink sees it, over columns.
type sinkTarget struct {
	p       *icebergPipeline
	read    sinkReader
	columns []string
	keys    map[int]bool // every id the source may have held: Couchbase cannot list its keys
}

// know adds the inclusive id ranges to the keys the reader looks up (Couchbase only needs it).
func (s *sinkTarget) know(ranges ...[2]int) {
	for _, r := range ranges {
		for id := r[0]; id <= r[1]; id++ {
			s.keys[id] = true
		}
	}
}

// universe lists the known ids as text, sorted.
func (s *sinkTarget) universe() []string {
	ids := make([]int, 0, len(s.keys))
	for id := range s.keys {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.Itoa(id)
	}
	return out
}

// waitEqual waits until the sink shows the source's items key by key.
func (s *sinkTarget) waitEqual() { waitSinkEqual(s.p, s.read, s.columns) }

// itemsTarget is a pipeline of public.items (o.Sink and o.Tables are set here) into d, and its
// reader over every column of public.items d shows.
func itemsTarget(t *testing.T, o pipelineOptions, d destination) *sinkTarget {
	t.Helper()
	target := d.target("items")
	o.Sink, o.Tables = d.yaml, []string{"public.items:" + target}
	s := &sinkTarget{p: newPipelineWith(t, o), columns: d.items, keys: map[int]bool{}}
	s.read = func(ctx context.Context) (localrun.Table, error) {
		return d.read(s.p, target, d.items, s.universe())(ctx)
	}
	return s
}

// liveItemKeys are the ids liveItemChanges may create.
var liveItemKeys = [][2]int{{200001, 200500}, {900000, 900000}}

// roundWriter writes small rounds to a source (20 new rows, an update of earlier rows, a
// delete of two rows of the previous round) until stopped or a statement fails (the comparison
// is with what the source holds afterwards). Ids from base on are its own.
type roundWriter struct {
	base       int
	cancel     context.CancelFunc
	done       chan int
	writeCount // rounds written
}

// roundRows is how many rows a round of roundWriter inserts.
const roundRows = 20

// startRounds starts a roundWriter on dsn.
func startRounds(dsn string, base int) *roundWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &roundWriter{base: base, cancel: cancel, done: make(chan int, 1)}
	go func() {
		defer w.finish()
		i := 0
		for ; ctx.Err() == nil; i++ {
			lo := base + i*roundRows
			if err := execSQL(ctx, dsn,
				itemsSeed(lo, lo+roundRows-1),
				roundUpdate(i, base, lo, 31*roundRows),
				fmt.Sprintf(`DELETE FROM public.items WHERE id BETWEEN %d AND %d`, lo-roundRows+3, lo-roundRows+4)); err != nil {
				break
			}
			w.add()
			pace(ctx, 100*time.Millisecond)
		}
		w.done <- i
	}()
	return w
}

// roundUpdate is the update of round i of a writer whose keys start at base and whose round
// inserts from lo: a thirty-first of the rows below base (the seed) and of the last window keys
// it wrote, the same rows every 31 rounds. Of every key below lo, as it was, the update volume
// grew with the square of the rounds (300,000 row changes in 280 rounds of the lost-connection
// test, which the sinks then had to catch up on: Couchbase on gocaves for two minutes of make
// test).
func roundUpdate(i, base, lo, window int) string {
	return fmt.Sprintf(`UPDATE public.items SET qty = coalesce(qty, 0) + 1, name = name || '+' WHERE id %% 31 = %d AND (id < %d OR id BETWEEN %d AND %d)`,
		i%31, base, lo-window, lo-1)
}

// stop stops the writer and returns the id range its rounds (the last one perhaps partly)
// inserted, and the number of rounds.
func (w *roundWriter) stop() ([2]int, int) {
	w.cancel()
	n := <-w.done
	return [2]int{w.base, w.base + (n+1)*roundRows - 1}, n
}

// waitCommitRetried waits until the table's CommitBatch shows a failed attempt (attempt > 1
// with a last failure, as the Web UI shows it) and returns what it saw.
func waitCommitRetried(t *testing.T, p *icebergPipeline, what string) string {
	t.Helper()
	var seen string
	err := localrun.WaitFor(context.Background(), "CommitBatch to show retries while "+what, 2*time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			a, err := pendingCommit(ctx, p)
			if err != nil || a == nil {
				return false, "no pending CommitBatch", err
			}
			if a.GetAttempt() > 1 && a.GetLastFailure() != nil {
				seen = fmt.Sprintf("attempt %d, last failure %q", a.GetAttempt(), a.GetLastFailure().GetMessage())
				return true, "", nil
			}
			return false, fmt.Sprintf("attempt %d state %s", a.GetAttempt(), a.GetState()), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// TestCouchbaseOutageMidStream makes a private gocaves unreachable while the source keeps
// writing: its process group is stopped (SIGSTOP; a restart would lose its in-memory
// documents), so connections hang as with a frozen or partitioned server. It stays frozen
// until the table's CommitBatch retries visibly (about a minute: gocb's KV timeout is 30 s),
// and once the server runs again (SIGCONT) the table catches up with nothing lost, document by
// document.
func TestCouchbaseOutageMidStream(t *testing.T) {
	defer parallel(t)()
	_, cb := privateService(t, devstack.ServiceCouchbase)
	s := itemsTarget(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 2000)}}, couchbaseDestinationOn(t, testenv.CouchbaseInfo{
		ConnString: cb.URL, Username: cb.Extra["username"], Password: cb.Extra["password"], Bucket: cb.Extra["bucket"]}))
	s.know([2]int{1, 2000})
	s.p.worker("worker")
	s.p.sluice("start")
	s.p.waitStream(itemsTable)

	// The shell that runs gocaves leads its process group (devstack starts it with setsid).
	freeze := func(sig syscall.Signal) error { return syscall.Kill(-cb.PID, sig) }
	t.Cleanup(func() { _ = freeze(syscall.SIGCONT) })
	w := startRounds(s.p.dsn, 100000)
	w.waitMore(t, 10, "writes in flight when the server freezes")
	if err := freeze(syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping gocaves (process group %d): %v", cb.PID, err)
	}
	down := time.Now()
	retried := waitCommitRetried(t, s.p, "Couchbase is frozen")
	t.Logf("while frozen: %s", retried)
	if err := freeze(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("gocaves frozen for %s", time.Since(down).Round(time.Second))
	w.waitMore(t, 10, "writes go on after the outage too")
	written, rounds := w.stop()
	s.know(written)
	s.know(liveItemKeys...)
	s.p.exec(liveItemChanges...)
	back := time.Now()
	s.waitEqual()
	t.Logf("%d write rounds; equal %s after the outage", rounds, time.Since(back).Round(time.Second))
}

// TestIcebergStorageOutageMidStream runs an Iceberg pipeline whose warehouse is on S3 and cuts
// the worker's connections to the object store (a TCP proxy in front of it that refuses and
// drops connections) while the source keeps writing, until the table's CommitBatch has retried
// visibly and the table's workflow retries the failed step itself (the attempts of one
// execution spent); once the store is reachable again the table catches up with nothing lost,
// key by key (read back from the same catalog and bucket).
func TestIcebergStorageOutageMidStream(t *testing.T) {
	defer parallel(t)()
	store := testenv.S3(t)
	px := startProxy(t, strings.TrimPrefix(store.Endpoint, "http://"))
	sinkYAML := fmt.Sprintf(`  type: iceberg
  iceberg:
    catalog:
      type: sql
      dialect: sqlite
      uri: %s
    warehouse: s3://%s/warehouse
    s3:
      endpoint: http://%s
      region: %s
      access_key_id: %s
      secret_access_key: %s`, filepath.Join(t.TempDir(), "catalog.db"), store.Bucket, px.Addr(), store.Region, store.AccessKeyID, store.SecretAccessKey)
	s := itemsTarget(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 5000)}}, icebergDestinationOf(sinkYAML))
	s.p.worker("worker")
	s.p.sluice("start")
	s.p.waitStream(itemsTable)
	s.waitEqual() // the backfill is on S3 and readable before the cut

	w := startRounds(s.p.dsn, 100000)
	w.waitMore(t, 10, "writes in flight when the object store is cut off")
	cut := px.Cut()
	down := time.Now()
	t.Logf("cut %d connections to the object store", cut)
	retried := waitCommitRetried(t, s.p, "the object store is unreachable")
	t.Logf("while cut: %s", retried)
	t.Logf("then: %s", s.p.waitTableRetrying(itemsTable, "the object store is unreachable"))
	px.Restore()
	t.Logf("object store unreachable for %s", time.Since(down).Round(time.Second))
	w.waitMore(t, 10, "writes go on after the outage too")
	_, rounds := w.stop()
	s.p.exec(liveItemChanges...)
	back := time.Now()
	s.waitEqual()
	t.Logf("%d write rounds; proxy %+v; equal %s after the restore", rounds, px.Stats(), time.Since(back).Round(time.Second))
}
