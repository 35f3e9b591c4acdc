package iceberg

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestInteropUnpartitioned reads an unpartitioned table with iceberg-go and with ClickHouse
// (chdb) after inserts, updates, deletes and primary-key changes, after a column is added
// (schema evolution: the new column's values and NULL for rows written before), and after
// maintenance (compaction, manifest rewrite, snapshot expiry): both equal the source key by key.
func TestInteropUnpartitioned(t *testing.T) {
	t.Parallel()
	ch := testenv.NewChDB(t)
	e := newEventsTable(t, nil)
	rng := rand.New(rand.NewPCG(18, 2))
	e.streamEvents(rng, 6)
	e.check(ch, "after inserts, updates, deletes and key changes")

	// Schema evolution: a column added in Postgres.
	e.spec = eventsSpec("raw.events", "note")
	if err := e.sink.EnsureTable(t.Context(), e.spec); err != nil {
		t.Fatalf("EnsureTable with a new column: %v", err)
	}
	e.streamEvents(rng, 3)
	e.check(ch, "after adding a column")
	rows, err := ch.IcebergLocal(t.Context(), e.table().Location(), "id, note")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		id, _ := r["id"].(interface{ Int64() (int64, error) }).Int64()
		want, set := e.extra[id]
		got, isText := r["note"].(string)
		if set && got != want || !set && isText {
			t.Errorf("chdb: key %d note = %v, want %q (set %v)", id, r["note"], want, set)
		}
	}

	if _, err := e.sink.MaintainWith(t.Context(), e.spec.Target, MaintenanceOptions{RetainSnapshots: 1, MinInputFiles: 2}); err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	if n := len(e.table().Metadata().Snapshots()); n > 3 {
		t.Errorf("%d snapshots after expiry with RetainSnapshots 1", n)
	}
	e.check(ch, "after compaction and snapshot expiry")
}

// TestMaintenanceRemovesOrphans: a commit cut off after its files were written (the catalog
// commit fails with an unknown outcome, as when storage or the catalog connection is cut) leaves
// data, delete, manifest and metadata files no snapshot references. Maintenance removes those
// older than the orphan age and keeps younger ones (a commit may still be in flight); the table
// reads the same before and after, in iceberg-go and in ClickHouse (chdb).
func TestMaintenanceRemovesOrphans(t *testing.T) {
	t.Parallel()
	ch := testenv.NewChDB(t)
	e := newEventsTable(t, &TableLayout{PartitionBy: []string{"day(created_at)"}})
	e.apply(change{id: 1, at: day(1, 0), name: "a"}, change{id: 2, at: day(2, 0), name: "b"})
	e.apply(change{id: 1, at: day(3, 0), name: "a2"}, change{id: 3, at: day(3, 0), name: "c"})
	loc := strings.TrimPrefix(e.table().Location(), "file://")
	before := listFiles(t, loc)

	// A batch whose catalog commit is cut off: its files are written, the commit never lands.
	cut, cancel := context.WithCancel(t.Context())
	e.sink.beforeCommit = func(context.Context) { cancel() }
	model := maps(e.model)
	e.lsn += 0x100
	failed := e.batchOf(change{id: 2, at: day(4, 0), name: "lost"}, change{id: 3, delete: true})
	if err := e.sink.Apply(cut, failed); err == nil {
		t.Fatal("the cut commit succeeded")
	}
	e.sink.beforeCommit = nil
	e.model = model
	var orphans []string
	for _, f := range listFiles(t, loc) {
		if !slices.Contains(before, f) {
			orphans = append(orphans, f)
		}
	}
	if len(orphans) < 3 {
		t.Fatalf("the cut commit left %d files (%v); want its data, delete and manifest files", len(orphans), orphans)
	}
	t.Logf("orphans of the cut commit: %v", orphans)
	e.check(ch, "after the cut commit")

	// The orphans are two hours old; a stray file written just now may belong to a commit in flight.
	old := time.Now().Add(-2 * time.Hour)
	for _, f := range orphans {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	young := filepath.Join(loc, "data", "in-flight.parquet")
	if err := os.WriteFile(young, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := DefaultMaintenanceOptions() // orphans older than an hour
	opts.OrphanFileAge = time.Hour
	res, err := e.sink.MaintainWith(t.Context(), e.spec.Target, opts)
	if err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	for _, f := range orphans {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("orphan %s is still there after maintenance (removed %d)", f, res.RemovedOrphanFiles)
		}
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("maintenance removed %s, younger than the orphan age: %v", young, err)
	}
	e.check(ch, "after orphan removal")
	e.apply(change{id: 2, at: day(5, 0), name: "b2"}, change{id: 3, delete: true})
	e.check(ch, "after a commit following orphan removal")
}

func maps(m map[int64]event) map[int64]event {
	out := make(map[int64]event, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// listFiles lists the regular files under dir.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
