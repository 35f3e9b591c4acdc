package iceberg

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
)

// TestApplyUpsertsDeletesAndKeyChanges applies inserts, updates, deletes and a key change (a
// delete of the old key and an insert of the new one, as the buffer emits it) and compares a
// scan with deletes applied to the expected rows, key by key.
func TestApplyUpsertsDeletesAndKeyChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(orders.Insert(1, "a", 1), orders.Insert(2, "b", 2), orders.Insert(3, "c", 3), orders.Insert(4, "d", 4), orders.Insert(5, "e", 5))
	h.apply(orders.Update(2, "b2", 20), orders.Delete(3), orders.Delete(4), orders.Insert(40, "d", 4), orders.Insert(6, "f", 6))
	last := h.apply(orders.Delete(6), orders.Insert(3, "c again", 33), orders.Update(5, "e2", 50), orders.Delete(99))

	want := map[int64]row{1: {"a", 1}, 2: {"b2", 20}, 3: {"c again", 33}, 40: {"d", 4}, 5: {"e2", 50}}
	if d := sinktest.DiffRows(want, h.rows()); d != "" {
		t.Errorf("scan differs:\n%s", d)
	}
	data, eq := h.fileCounts()
	if eq == 0 {
		t.Errorf("no equality delete file in the manifests; deletes and updates must write them")
	}
	if data != 3 {
		t.Errorf("%d data files, want 3 (one per batch)", data)
	}
	if pos, ok := h.position(); !ok || pos != last.Hi {
		t.Errorf("Position = %v, %v; want %v", pos, ok, last.Hi)
	}
	snap := h.table().CurrentSnapshot()
	if got := snap.Summary.Properties[positionKey]; got == "" {
		t.Errorf("snapshot summary lacks %s", positionKey)
	}
	if got := h.table().Properties()[positionKey]; got != snap.Summary.Properties[positionKey] {
		t.Errorf("table property %s = %q, summary has %q", positionKey, got, snap.Summary.Properties[positionKey])
	}
	// New tables write zstd at the configured level (1 unless set).
	if got := h.table().Properties()["write.parquet.compression-level"]; got != "1" {
		t.Errorf("table property write.parquet.compression-level = %q, want 1", got)
	}
	// The unnamed context columns are never written; the named one is, under its name.
	sc := h.table().Schema()
	for _, name := range []string{"__op", "__pos", "__commit_ts", "__ingest_ts", "__snapshot", "__phase", "op", "pos"} {
		if _, ok := sc.FindFieldByName(name); ok {
			t.Errorf("table has column %s, which no metadata entry names", name)
		}
	}
	if _, ok := sc.FindFieldByName("committed_at"); !ok {
		t.Errorf("table lacks committed_at (metadata {from: commit_ts, as: committed_at})")
	}
	if ids := sc.IdentifierFieldIDs; len(ids) != 1 {
		t.Errorf("identifier fields %v, want the id column", ids)
	}
}

// TestReplayedBatchCannotResurrect: insert K, commit; delete K, commit; re-applying the insert's
// batch is covered by the position (CommitBatch would skip it) and Apply itself refuses to move
// the table back, so K stays deleted.
func TestReplayedBatchCannotResurrect(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	insert := h.apply(orders.Insert(7, "k", 7))
	deleted := h.apply(orders.Delete(7))

	pos, ok := h.position()
	if !ok {
		t.Fatal("no position after two commits")
	}
	for _, b := range []sinks.Batch{insert, deleted} {
		if c, err := pos.Compare(b.Hi); err != nil || c < 0 {
			t.Errorf("committed %s does not cover replayed batch %s (compare %d, %v)", pos, b.Hi, c, err)
		}
	}
	if err := h.sink.Apply(t.Context(), insert); err != nil {
		t.Fatalf("re-applying the insert: %v", err)
	}
	if got := h.rows(); len(got) != 0 {
		t.Errorf("after replaying the insert the table shows %v; K must stay deleted", got)
	}
	if p, _ := h.position(); p != deleted.Hi {
		t.Errorf("position moved to %s by a replay; want %s", p, deleted.Hi)
	}
	// A position of another source is never compared silently.
	other := h.batch(batch.PhaseStream, orders.Insert(8, "x", 8))
	other.Hi.Source.Slot = "another_slot"
	if err := h.sink.Apply(t.Context(), other); !sinks.IsPoison(err) {
		t.Errorf("Apply with a position of another source: %v, want poison", err)
	}
}

// TestSnapshotPhase: snapshot chunks append without delete files while their keys cannot be in
// the table; a chunk whose keys may be there (an earlier attempt) takes the upsert path, and so
// do live rows of a snapshot-phase batch.
func TestSnapshotPhase(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	chunk := func(from, to int64) []batch.Change {
		var out []batch.Change
		for id := from; id <= to; id++ {
			out = append(out, orders.Snapshot(id, "s", int(id)))
		}
		return out
	}
	steps := []struct {
		name    string
		changes []batch.Change
		wantEq  int // equality delete files in the table after the step
	}{
		{"first chunk appends", chunk(1, 100), 0},
		{"next chunk appends", chunk(101, 200), 0},
		{"overlapping chunk upserts", chunk(150, 250), 1},
		{"live row in snapshot phase upserts", []batch.Change{orders.Update(300, "live", 1)}, 2},
	}
	for _, st := range steps {
		b := h.batch(batch.PhaseSnapshot, st.changes...)
		if err := h.sink.Apply(t.Context(), b); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if _, eq := h.fileCounts(); eq != st.wantEq {
			t.Errorf("%s: %d equality delete files, want %d", st.name, eq, st.wantEq)
		}
	}
	got := h.rows()
	if len(got) != 251 {
		t.Errorf("%d rows visible, want 251 (keys 1..250 and 300, each once)", len(got))
	}
}

// TestDiscardSnapshot empties the table and its position without copy-on-write deletes, is
// idempotent, and leaves the table usable.
func TestDiscardSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(orders.Insert(1, "a", 1), orders.Insert(2, "b", 2))
	h.apply(orders.Delete(1), orders.Update(2, "b2", 2))
	for i := range 2 {
		if err := h.sink.DiscardSnapshot(t.Context(), h.spec); err != nil {
			t.Fatalf("DiscardSnapshot #%d: %v", i+1, err)
		}
		if got := h.rows(); len(got) != 0 {
			t.Errorf("after discard #%d the table shows %v", i+1, got)
		}
		if p, ok := h.position(); ok {
			t.Errorf("after discard #%d Position = %s, want none", i+1, p)
		}
		if d, eq := h.fileCounts(); d != 0 || eq != 0 {
			t.Errorf("after discard #%d: %d data and %d delete files live, want none", i+1, d, eq)
		}
	}
	b := h.apply(orders.Insert(3, "c", 3))
	if d := sinktest.DiffRows(map[int64]row{3: {"c", 3}}, h.rows()); d != "" {
		t.Errorf("after discard and a new batch:\n%s", d)
	}
	if p, ok := h.position(); !ok || p != b.Hi {
		t.Errorf("Position = %v, %v; want %s", p, ok, b.Hi)
	}
}

// TestEnsureTableEvolution: an added column evolves the table, a dropped one stays in it (NULL
// from then on, docs/schema-changes.md), other changes are poison.
func TestEnsureTableEvolution(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(orders.Insert(1, "a", 1))

	added := orders.Spec(h.spec.Target)
	added.Schema.Columns = append(added.Schema.Columns, batch.Column{Name: "note", TypeOID: 25, TypeName: "text"})
	if err := h.sink.EnsureTable(t.Context(), added); err != nil {
		t.Fatalf("EnsureTable with an added column: %v", err)
	}
	if err := h.sink.EnsureTable(t.Context(), added); err != nil {
		t.Fatalf("EnsureTable again: %v", err)
	}
	if _, ok := h.table().Schema().FindFieldByName("note"); !ok {
		t.Fatalf("column note was not added")
	}
	h.spec = added
	h.apply(batch.Change{Op: batch.OpInsert, Values: []batch.Value{sinktest.Text("2"), sinktest.Text("b"), sinktest.Text("2"), sinktest.Text("2.00"), sinktest.Text("hi")}})
	if d := sinktest.DiffRows(map[int64]row{1: {"a", 1}, 2: {"b", 2}}, h.rows()); d != "" {
		t.Errorf("after evolution:\n%s", d)
	}

	dropped := orders.Spec(h.spec.Target)
	if err := h.sink.EnsureTable(t.Context(), dropped); err != nil {
		t.Fatalf("EnsureTable without column note (dropped in the source): %v", err)
	}
	if _, ok := h.table().Schema().FindFieldByName("note"); !ok {
		t.Fatalf("column note was dropped from the Iceberg table; it stays")
	}
	h.spec = dropped
	h.apply(orders.Update(2, "b2", 3))
	if d := sinktest.DiffRows(map[int64]row{1: {"a", 1}, 2: {"b2", 3}}, h.rows()); d != "" {
		t.Errorf("after the drop:\n%s", d)
	}

	retyped := orders.Spec(h.spec.Target)
	retyped.Schema.Columns = append(retyped.Schema.Columns, batch.Column{Name: "note", TypeOID: 20, TypeName: "bigint"})
	rekeyed := orders.Spec(h.spec.Target)
	rekeyed.Schema.Columns = append(rekeyed.Schema.Columns, batch.Column{Name: "note", TypeOID: 25, TypeName: "text"})
	rekeyed.Schema.Columns[1].Key, rekeyed.Schema.Columns[1].NotNull = true, true
	floatKey := orders.Spec("raw.floats")
	floatKey.Schema.Columns[0] = batch.Column{Name: "id", TypeOID: 701, TypeName: "double precision", Key: true, NotNull: true}
	noKey := orders.Spec("raw.nokey")
	noKey.Schema.Columns[0].Key = false
	badTarget := orders.Spec("orders")
	for name, spec := range map[string]sinks.TableSpec{
		"changed type": retyped, "changed key": rekeyed,
		"float key": floatKey, "no key": noKey, "target without namespace": badTarget,
	} {
		t.Run(name, func(t *testing.T) {
			err := h.sink.EnsureTable(t.Context(), spec)
			if !sinks.IsPoison(err) {
				t.Fatalf("EnsureTable: %v, want a poison error", err)
			}
			t.Logf("error: %v", err)
		})
	}
}

// TestConcurrentCommitIsTransient: when another writer commits between Apply's read and its
// commit (a zombie attempt of the same batch), the commit fails as a transient conflict, leaves
// no orphan files, and the retry finds the batch covered.
func TestConcurrentCommitIsTransient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(orders.Insert(1, "a", 1))
	b := h.batch(batch.PhaseStream, orders.Update(1, "a2", 2), orders.Insert(2, "b", 2))
	h.sink.beforeCommit = func(ctx context.Context) {
		h.sink.beforeCommit = nil
		if err := h.sink.Apply(ctx, b); err != nil {
			t.Errorf("the competing Apply: %v", err)
		}
	}
	err := h.sink.Apply(t.Context(), b)
	if err == nil || sinks.IsPoison(err) {
		t.Fatalf("Apply that lost the race: %v, want a transient commit conflict", err)
	}
	t.Logf("conflict: %v", err)
	if err := h.sink.Apply(t.Context(), b); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if d := sinktest.DiffRows(map[int64]row{1: {"a2", 2}, 2: {"b", 2}}, h.rows()); d != "" {
		t.Errorf("after the race:\n%s", d)
	}
	// The loser's files are orphans (the catalog did not say the commit cleanly failed, so Apply
	// left them); orphan cleanup in Maintain removes them.
	before := countFiles(t, h.table().Location())
	res, err := h.sink.MaintainWith(t.Context(), h.spec.Target, MaintenanceOptions{OrphanFileAge: time.Nanosecond, MinInputFiles: 100})
	if err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	if after := countFiles(t, h.table().Location()); after != 4 {
		t.Errorf("%d parquet files after orphan cleanup (from %d, %d removed), want the 4 live ones (2 data, 2 equality delete)", after, before, res.RemovedOrphanFiles)
	}
	if d := sinktest.DiffRows(map[int64]row{1: {"a2", 2}, 2: {"b", 2}}, h.rows()); d != "" {
		t.Errorf("after orphan cleanup:\n%s", d)
	}
}

func countFiles(t *testing.T, location string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(strings.TrimPrefix(location, "file://"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".parquet") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPartitionedByKeyBucket runs upserts, deletes and a snapshot chunk on a table partitioned by
// bucket(4, id): equality deletes are routed to the partition of their key.
func TestPartitionedByKeyBucket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := newHarness(t, &Config{
		Catalog:          CatalogConfig{Type: CatalogSQL, URI: filepath.Join(dir, "catalog.db")},
		Warehouse:        filepath.Join(dir, "warehouse"),
		PartitionBuckets: 4,
	})
	if spec := h.table().Spec(); spec.NumFields() != 1 {
		t.Fatalf("partition spec %s, want bucket[4](id)", spec)
	}
	var chunk []batch.Change
	for id := range int64(40) {
		chunk = append(chunk, orders.Snapshot(id, "s", int(id)))
	}
	if err := h.sink.Apply(t.Context(), h.batch(batch.PhaseSnapshot, chunk...)); err != nil {
		t.Fatal(err)
	}
	h.apply(orders.Update(1, "u", 100), orders.Delete(2), orders.Delete(3), orders.Insert(50, "n", 50))
	h.apply(orders.Insert(2, "back", 2), orders.Delete(50))
	want := map[int64]row{}
	for id := range int64(40) {
		want[id] = row{"s", id}
	}
	want[1] = row{"u", 100}
	want[2] = row{"back", 2}
	delete(want, 3)
	if d := sinktest.DiffRows(want, h.rows()); d != "" {
		t.Errorf("scan differs:\n%s", d)
	}
	if _, err := h.sink.MaintainWith(t.Context(), h.spec.Target, MaintenanceOptions{RetainSnapshots: 1, MinInputFiles: 2}); err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	if d := sinktest.DiffRows(want, h.rows()); d != "" {
		t.Errorf("scan after maintenance differs:\n%s", d)
	}
}

// TestConcurrentTables commits to several tables of one sqlite catalog at the same time, as the
// table workflows of a pipeline do on one worker.
func TestConcurrentTables(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	const tables, commits = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, tables)
	for i := range tables {
		th := &harness{t: t, sink: h.sink, spec: orders.Spec(fmt.Sprintf("raw.orders_%d", i)), lsn: 0x1000}
		if err := h.sink.EnsureTable(t.Context(), th.spec); err != nil {
			t.Fatal(err)
		}
		batches := make([]sinks.Batch, commits)
		for c := range commits {
			batches[c] = th.batch(batch.PhaseStream, orders.Insert(int64(c), "x", c), orders.Delete(int64(c-1)))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range batches {
				if err := h.sink.Apply(t.Context(), b); err != nil {
					errs <- fmt.Errorf("%s at %s: %w", b.Spec.Target, b.Hi, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range tables {
		th := &harness{t: t, sink: h.sink, spec: orders.Spec(fmt.Sprintf("raw.orders_%d", i))}
		if d := sinktest.DiffRows(map[int64]row{commits - 1: {"x", commits - 1}}, th.rows()); d != "" {
			t.Errorf("table %d:\n%s", i, d)
		}
	}
}

// TestSnapshotChunksShareOnePosition: every snapshot row is at (snapshot LSN, 0), so all chunks
// of a backfill carry the same Hi. Each chunk must still be applied, and replaying one must not
// duplicate rows.
func TestSnapshotChunksShareOnePosition(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	first := h.batch(batch.PhaseSnapshot, orders.Snapshot(1, "a", 1), orders.Snapshot(2, "b", 2))
	second := h.batch(batch.PhaseSnapshot, orders.Snapshot(3, "c", 3), orders.Snapshot(4, "d", 4))
	for _, b := range []*sinks.Batch{&first, &second} {
		p := batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: 0x5000000}}
		b.Lo, b.Hi = p, p
	}
	for i, b := range []sinks.Batch{first, second, first} {
		if err := h.sink.Apply(t.Context(), b); err != nil {
			t.Fatalf("apply #%d: %v", i+1, err)
		}
	}
	want := map[int64]row{1: {"a", 1}, 2: {"b", 2}, 3: {"c", 3}, 4: {"d", 4}}
	if d := sinktest.DiffRows(want, h.rows()); d != "" {
		t.Errorf("scan differs:\n%s", d)
	}
	// A stream batch at the snapshot's position is covered; a later one is applied.
	stale := h.batch(batch.PhaseStream, orders.Delete(1))
	stale.Lo, stale.Hi = first.Hi, first.Hi
	if err := h.sink.Apply(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.rows()[1]; !ok {
		t.Errorf("a stream batch at the committed position was applied")
	}
}
