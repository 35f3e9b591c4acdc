package source

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestLargeTransactionMemoryBounded decodes one 1,000,000-row transaction into a batch.Buffer
// whose cut batches are dropped (as if staged), and checks that the heap stays bounded by the
// batch limits and the read-ahead, not by the transaction. It runs alone (not parallel) so the
// heap it measures is its own.
func TestLargeTransactionMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes a 1,000,000-row transaction")
	}
	const rows = 1_000_000
	db := newTestDB(t, "CREATE TABLE big (id int PRIMARY KEY, a text, b bigint, c timestamptz)")
	cfg := db.config(t, "big")
	info := setup(t, cfg)
	compare := os.Getenv("SLUICE_BENCH") != ""
	if compare {
		// A second slot at the same point, for pg_recvlogical to consume the same transaction.
		db.exec(t, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", cfg.Slot+"_ref")
	}
	start := time.Now()
	db.exec(t, "INSERT INTO big SELECT g, md5(g::text), g * 7, now() FROM generate_series(1, $1) g", rows)
	t.Logf("inserted %d rows in one transaction in %s", rows, time.Since(start).Round(time.Millisecond))

	if compare {
		// First, so the reader is not favoured by a warm cache (either order is noisy).
		recvlogical(t, db, cfg, db.walLSN(t), rows)
	}
	limits := batch.Limits{MaxRows: 10_000, MaxBytes: 4 << 20, MaxWait: time.Minute}
	buf, err := batch.NewBuffer(info.Schemas[0].Table, limits)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	var (
		n, batches int
		cuts       []batch.Cut
		box        = &safeBox{}
	)
	start = time.Now()
	streamFunc(t, cfg, StreamOptions{Schemas: info.Schemas, Safe: box.get}, db.walLSN(t), func(ev Event) error {
		switch e := ev.(type) {
		case *ChangeEvent:
			if buf.Len() == 0 {
				box.set(e.Change.Pos, true)
			}
			cuts, err = buf.Add(cuts[:0], e.Change, time.Now())
			if err != nil {
				return err
			}
			batches += len(cuts)
			if len(cuts) > 0 {
				box.set(batch.Position{}, false) // staged and committed at once
			}
			if n++; n%20_000 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
		case *CommitEvent:
			batches += len(buf.Flush(cuts[:0]))
			box.set(batch.Position{}, false)
		}
		return nil
	})
	elapsed := time.Since(start)
	if n != rows {
		t.Fatalf("decoded %d rows, want %d", n, rows)
	}
	grew := int64(peak) - int64(base)
	t.Logf("decoded %d rows in %s (%.0f rows/s), %d batches; peak heap %.1f MiB above a %.1f MiB base; process peak RSS %s",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), batches, float64(grew)/(1<<20), float64(base)/(1<<20), peakRSS())
	// One batch of 10,000 rows is about 1.5 MiB of values plus Go overhead, and 256 messages are
	// read ahead; the whole transaction would be hundreds of MiB.
	if grew > 64<<20 {
		t.Errorf("peak heap grew by %.1f MiB: memory is not bounded by the batch limits", float64(grew)/(1<<20))
	}
}

// peakRSS returns the process's peak resident set size (VmHWM) as Linux reports it.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// recvlogical times pg_recvlogical consuming the same stream from the reference slot, to
// compare the reader with Postgres' own client on the same machine in the same run.
func recvlogical(t *testing.T, db *testDB, cfg Config, end uint64, rows int) {
	t.Helper()
	bin := filepath.Join(testenv.PostgresBin(t), "pg_recvlogical")
	start := time.Now()
	cmd := exec.CommandContext(context.Background(), bin, "-d", db.dsn, "--slot", cfg.Slot+"_ref", "--start",
		"-o", "proto_version=1", "-o", "publication_names="+cfg.Publication, "--endpos", formatLSN(end), "-f", "/dev/null", "--no-loop")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_recvlogical: %v\n%s", err, out)
	}
	el := time.Since(start)
	t.Logf("pg_recvlogical consumed the same %d rows in %s (%.0f rows/s)", rows, el.Round(time.Millisecond), float64(rows)/el.Seconds())
}
