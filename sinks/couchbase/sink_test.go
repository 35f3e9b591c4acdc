package couchbase

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestApplyUpsertsDeletesAndKeyChanges backfills, then applies inserts, updates, deletes and key
// changes (a delete of the old key and an insert of the new one, as the buffer emits them), and
// compares every key ever used with the expected rows.
func TestApplyUpsertsDeletesAndKeyChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(batch.PhaseSnapshot, orders.Snapshot(1, "a", 1), orders.Snapshot(2, "b", 2), orders.Snapshot(3, "c", 3), orders.Snapshot(4, "d", 4), orders.Snapshot(5, "e", 5))
	h.apply(batch.PhaseStream, orders.Update(2, "b2", 20), orders.Delete(3), orders.Delete(4), orders.Insert(40, "d", 4), orders.Insert(6, "f", 6))
	last := h.apply(batch.PhaseStream, orders.Delete(6), orders.Insert(3, "c again", 33), orders.Update(5, "e2", 50), orders.Delete(99))

	want := map[int64]row{1: {"a", 1}, 2: {"b2", 20}, 3: {"c again", 33}, 40: {"d", 4}, 5: {"e2", 50}}
	universe := map[int64]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 40: true, 99: true}
	if d := h.diff(want, universe); d != "" {
		t.Errorf("documents differ:\n%s", d)
	}
	if pos, ok := h.position(); !ok || pos != last.Hi {
		t.Errorf("Position = %v, %v; want %v", pos, ok, last.Hi)
	}
	// The whole body: columns in order, numeric exact, the named context column, nothing else.
	doc, _ := h.doc(5)
	wantDoc := `{"committed_at":"2026-11-30T12:00:00Z","id":5,"name":"e2","price":"50.50","qty":50}`
	if got := jsonOf(doc); got != wantDoc {
		t.Errorf("document 5 = %s, want %s", got, wantDoc)
	}
	// The key index lists every key a batch created, once: the snapshot's, and the stream's new
	// keys 40 and 6; key 3, deleted and inserted again, was indexed when its tombstone was made
	// from a live document, and 99, deleted while absent, never had a document.
	keys, _, err := h.sink.readIndex(t.Context(), h.tgt)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if want := []string{"1", "2", "3", "4", "40", "5", "6"}; !slices.Equal(keys, want) {
		t.Errorf("key index %v, want %v", keys, want)
	}
}

// TestRandomHistoryMatchesModel applies a random history of collapsed batches (inserts, updates,
// deletes, key changes) and compares the documents with a model of the source, key by key.
func TestRandomHistoryMatchesModel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	rng := rand.New(rand.NewPCG(7, 11))
	model := map[int64]row{}
	universe := map[int64]bool{}
	var changes []batch.Change
	for id := int64(1); id <= 300; id++ {
		model[id] = row{"snap", id}
		universe[id] = true
		changes = append(changes, orders.Snapshot(id, "snap", int(id)))
	}
	h.apply(batch.PhaseSnapshot, changes...)
	for n := range 15 {
		touched := map[int64]bool{}
		changes = changes[:0]
		for range 80 {
			id := rng.Int64N(400) + 1
			if touched[id] {
				continue
			}
			touched[id] = true
			universe[id] = true
			_, exists := model[id]
			switch r := rng.IntN(10); {
			case !exists:
				model[id] = row{"ins", int64(n)}
				changes = append(changes, orders.Insert(id, "ins", n))
			case r < 5:
				model[id] = row{"upd", int64(n)}
				changes = append(changes, orders.Update(id, "upd", n))
			case r < 8:
				delete(model, id)
				changes = append(changes, orders.Delete(id))
			default: // the key changes: delete the old key, insert the new one
				to := rng.Int64N(1000) + 1000
				if touched[to] || model[to] != (row{}) {
					continue
				}
				touched[to], universe[to] = true, true
				model[to] = model[id]
				delete(model, id)
				changes = append(changes, orders.Delete(id), orders.Insert(to, model[to].Name, int(model[to].Qty)))
			}
		}
		h.apply(batch.PhaseStream, changes...)
	}
	if d := h.diff(model, universe); d != "" {
		t.Errorf("documents differ from the source model:\n%s", d)
	}
}

// TestReplayedBatchCannotResurrect: insert K, commit; delete K, commit; re-applying the insert's
// batch is covered by the checkpoint and skipped, so K stays deleted; a partly covered batch
// only applies its rows above the checkpoint.
func TestReplayedBatchCannotResurrect(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	insert := h.apply(batch.PhaseStream, orders.Insert(7, "k", 7))
	deleted := h.apply(batch.PhaseStream, orders.Delete(7))

	if err := h.sink.Apply(t.Context(), insert); err != nil {
		t.Fatalf("re-applying the insert: %v", err)
	}
	if doc, ok := h.doc(7); ok {
		t.Errorf("after replaying the insert key 7 is %v; it must stay deleted", doc)
	}
	if p, _ := h.position(); p != deleted.Hi {
		t.Errorf("position moved to %s by a replay; want %s", p, deleted.Hi)
	}

	// A re-cut batch spanning the committed position: rows at or below it are dropped.
	h.lsn += 0x100
	spanning := orders.Batch(t, h.spec, batch.PhaseStream, deleted.Hi.Position.LSN, orders.Insert(7, "old", 1))
	spanning.Hi.Position = batch.Position{LSN: h.lsn}
	if err := h.sink.Apply(t.Context(), spanning); err != nil {
		t.Fatalf("applying a batch spanning the checkpoint: %v", err)
	}
	if doc, ok := h.doc(7); ok {
		t.Errorf("a row at the committed position was applied again: key 7 is %v", doc)
	}

	// A position of another source is never compared silently.
	other := h.batch(batch.PhaseStream, orders.Insert(8, "x", 8))
	other.Hi.Source.Slot = "another_slot"
	if err := h.sink.Apply(t.Context(), other); !sinks.IsPoison(err) {
		t.Errorf("Apply with a position of another source: %v, want poison", err)
	}
	if _, ok := h.doc(8); ok {
		t.Errorf("a batch of another source wrote document 8")
	}
}

// TestDiscardSnapshot empties the target and its position, including documents of a batch that
// never committed, is idempotent, and leaves the target usable.
func TestDiscardSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(batch.PhaseSnapshot, orders.Snapshot(1, "a", 1), orders.Snapshot(2, "b", 2))
	h.apply(batch.PhaseSnapshot, orders.Delete(1), orders.Update(2, "b2", 2), orders.Insert(3, "live", 3))
	// What a crash leaves after the index and documents of a batch, before its checkpoint.
	ctx := t.Context()
	cp, err := h.sink.readCheckpoint(ctx, h.tgt)
	if err != nil {
		t.Fatal(err)
	}
	crashed := h.batch(batch.PhaseSnapshot, orders.Snapshot(4, "d", 4), orders.Snapshot(5, "e", 5))
	l, _ := newLayout(h.spec)
	ops, _ := l.plan(crashed.Record)
	if _, err := h.sink.writeIndex(ctx, h.tgt, cp.IndexChunks, []string{"4", "5"}); err != nil {
		t.Fatal(err)
	}
	if err := h.sink.writeDocs(ctx, h.tgt, ops, "", "", nil); err != nil {
		t.Fatal(err)
	}

	universe := map[int64]bool{1: true, 2: true, 3: true, 4: true, 5: true}
	for i := range 2 {
		if err := h.sink.DiscardSnapshot(ctx, h.spec); err != nil {
			t.Fatalf("DiscardSnapshot #%d: %v", i+1, err)
		}
		if d := h.diff(nil, universe); d != "" {
			t.Errorf("after discard #%d:\n%s", i+1, d)
		}
		if p, ok := h.position(); ok {
			t.Errorf("after discard #%d Position = %s, want none", i+1, p)
		}
		if ck, chunks := h.metaDocs(); ck || chunks != 0 {
			t.Errorf("after discard #%d: checkpoint %v and %d index chunks left", i+1, ck, chunks)
		}
	}
	b := h.apply(batch.PhaseSnapshot, orders.Snapshot(3, "c", 3))
	if d := h.diff(map[int64]row{3: {"c", 3}}, universe); d != "" {
		t.Errorf("after discard and a new snapshot:\n%s", d)
	}
	if p, ok := h.position(); !ok || p != b.Hi {
		t.Errorf("Position = %v, %v; want %s", p, ok, b.Hi)
	}

	// A target that has streamed is emptied too (a resync): keys created in the stream phase,
	// by an insert, by reviving a tombstone and over a deleted snapshot key, are indexed.
	h.apply(batch.PhaseStream, orders.Insert(9, "stream", 9), orders.Delete(3))
	h.apply(batch.PhaseStream, orders.Insert(3, "again", 3), orders.Insert(1, "reborn", 1), orders.Update(9, "s2", 9))
	universe[9] = true
	if d := h.diff(map[int64]row{1: {"reborn", 1}, 3: {"again", 3}, 9: {"s2", 9}}, universe); d != "" {
		t.Fatalf("while streaming:\n%s", d)
	}
	if err := h.sink.DiscardSnapshot(ctx, h.spec); err != nil {
		t.Fatalf("DiscardSnapshot after streaming: %v", err)
	}
	if d := h.diff(nil, universe); d != "" {
		t.Errorf("after discarding a streamed target:\n%s", d)
	}
	if ck, chunks := h.metaDocs(); ck || chunks != 0 {
		t.Errorf("after discarding a streamed target: checkpoint %v and %d index chunks left", ck, chunks)
	}

	// A target that began streaming under a version that retired the index cannot be emptied.
	old := h.apply(batch.PhaseStream, orders.Insert(5, "old", 5))
	cp, err = h.sink.readCheckpoint(ctx, h.tgt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.sink.writeCheckpoint(ctx, h.tgt, cp, checkpoint{Position: &old.Hi, Streaming: true}); err != nil {
		t.Fatal(err)
	}
	err = h.sink.DiscardSnapshot(ctx, h.spec)
	if !sinks.IsPoison(err) || !strings.Contains(err.Error(), "drop collection") {
		t.Errorf("DiscardSnapshot of a target streamed without an index: %v; want poison saying what to do", err)
	}
}

// TestInterruptedDiscardIsFinished: a discard cut short leaves the checkpoint marked; Position
// reports none and the next Apply finishes the discard before writing.
func TestInterruptedDiscardIsFinished(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(batch.PhaseSnapshot, orders.Snapshot(1, "a", 1), orders.Snapshot(2, "b", 2))
	cp, err := h.sink.readCheckpoint(t.Context(), h.tgt)
	if err != nil {
		t.Fatal(err)
	}
	mark := cp.checkpoint
	mark.Discarding, mark.Position = true, nil
	if _, err := h.sink.writeCheckpoint(t.Context(), h.tgt, cp, mark); err != nil {
		t.Fatal(err)
	}
	if p, ok := h.position(); ok {
		t.Errorf("Position during a discard = %s, want none", p)
	}
	b := h.apply(batch.PhaseSnapshot, orders.Snapshot(3, "c", 3))
	if d := h.diff(map[int64]row{3: {"c", 3}}, map[int64]bool{1: true, 2: true, 3: true}); d != "" {
		t.Errorf("after Apply on an interrupted discard:\n%s", d)
	}
	if p, ok := h.position(); !ok || p != b.Hi {
		t.Errorf("Position = %v, %v; want %s", p, ok, b.Hi)
	}
}

// TestPoison: what retrying cannot fix stops the table, naming it; nothing is written.
func TestPoison(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(batch.PhaseStream, orders.Insert(1, "a", 1))

	t.Run("document too large", func(t *testing.T) {
		big := h.batch(batch.PhaseStream, orders.Insert(2, "ok", 2), orders.Insert(3, strings.Repeat("x", maxDocSize), 3))
		err := h.sink.Apply(t.Context(), big)
		if !sinks.IsPoison(err) || !strings.Contains(err.Error(), "shop.orders") || !strings.Contains(err.Error(), `"3"`) {
			t.Fatalf("Apply: %v; want poison naming the table and the key", err)
		}
		if _, ok := h.doc(2); ok {
			t.Errorf("a poison batch wrote some of its documents")
		}
	})
	for name, target := range map[string]string{
		"target with three parts": "a.b.c", "target starting with _": "_x", "metadata collection": "sluice_meta",
	} {
		t.Run(name, func(t *testing.T) {
			spec := orders.Spec(target)
			if err := h.sink.EnsureTable(t.Context(), spec); !sinks.IsPoison(err) {
				t.Fatalf("EnsureTable(%s): %v, want poison", target, err)
			} else {
				t.Logf("error: %v", err)
			}
		})
	}
}

// TestEnsureTableIdempotent creates the scope and collections once and accepts a changed schema:
// documents have none.
func TestEnsureTableIdempotent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	added := orders.Spec(h.spec.Target)
	added.Schema.Columns = append(added.Schema.Columns, batch.Column{Name: "note", TypeOID: 25, TypeName: "text"})
	for _, spec := range []sinks.TableSpec{h.spec, added} {
		if err := h.sink.EnsureTable(t.Context(), spec); err != nil {
			t.Fatalf("EnsureTable again: %v", err)
		}
	}
	have, err := h.sink.collections(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{h.tgt.String(), h.tgt.scope + "." + h.tgt.meta} {
		if !have[c] {
			t.Errorf("collection %s was not created", c)
		}
	}
	h.spec = added
	h.apply(batch.PhaseStream, batch.Change{Op: batch.OpInsert, Values: []batch.Value{sinktest.Text("2"), sinktest.Text("b"), sinktest.Text("2"), sinktest.Text("2.00"), sinktest.Text("hi")}})
	if doc, _ := h.doc(2); doc["note"] != "hi" {
		t.Errorf("document 2 = %v, want note hi", doc)
	}
}

// TestSnapshotChunks follows the backfill contract: chunks carry a zero Hi and write rows
// without a position; re-applying a chunk upserts; an empty batch commits the snapshot's
// position; a discard before that empties the target.
func TestSnapshotChunks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := t.Context()
	chunk := func(from, to int64, name string) sinks.Batch {
		var changes []batch.Change
		for id := from; id <= to; id++ {
			changes = append(changes, orders.Snapshot(id, name, int(id)))
		}
		b := h.batch(batch.PhaseSnapshot, changes...)
		b.Lo, b.Hi = batch.SourcePosition{}, batch.SourcePosition{}
		return b
	}
	universe := map[int64]bool{}
	want := map[int64]row{}
	for id := int64(1); id <= 250; id++ {
		universe[id] = true
	}
	attempt := func(name string) {
		t.Helper()
		if err := h.sink.DiscardSnapshot(ctx, h.spec); err != nil {
			t.Fatalf("DiscardSnapshot before the backfill: %v", err)
		}
		for _, b := range []sinks.Batch{chunk(1, 100, name), chunk(101, 200, name), chunk(101, 200, name), chunk(201, 250, name)} {
			if err := h.sink.Apply(ctx, b); err != nil {
				t.Fatalf("Apply chunk: %v", err)
			}
			if p, ok := h.position(); ok {
				t.Fatalf("a snapshot chunk committed position %s", p)
			}
		}
		for id := int64(1); id <= 250; id++ {
			want[id] = row{name, id}
		}
		if d := h.diff(want, universe); d != "" {
			t.Fatalf("after the chunks of attempt %s:\n%s", name, d)
		}
	}
	attempt("first")
	// The session is lost: the next run discards and copies again, with other values.
	attempt("second")
	if _, chunks := h.metaDocs(); chunks != 3 {
		t.Errorf("%d key-index chunks, want 3 (one per chunk that created documents after the discard; the re-applied one created none)", chunks)
	}

	end := h.batch(batch.PhaseSnapshot)
	end.Record = nil
	if err := h.sink.Apply(ctx, end); err != nil {
		t.Fatalf("Apply of the snapshot's end: %v", err)
	}
	if p, ok := h.position(); !ok || p != end.Hi {
		t.Fatalf("Position after the snapshot's end = %v, %v; want %s", p, ok, end.Hi)
	}
	h.apply(batch.PhaseStream, orders.Delete(1), orders.Update(2, "live", 2))
	delete(want, 1)
	want[2] = row{"live", 2}
	if d := h.diff(want, universe); d != "" {
		t.Errorf("after streaming:\n%s", d)
	}
	if _, chunks := h.metaDocs(); chunks != 3 {
		t.Errorf("%d key-index chunks after streaming began, want the 3 of the snapshot (the stream created no key)", chunks)
	}
}

// TestMissingCollectionForgetsCheckpoint: a checkpoint whose collection does not exist (dropped
// while the pipeline ran) describes documents that are gone; EnsureTable recreates the collection
// and removes the checkpoint, so the table is backfilled instead of streaming into nothing.
func TestMissingCollectionForgetsCheckpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.apply(batch.PhaseStream, orders.Insert(1, "a", 1))
	stale := orders.Spec(h.tgt.scope + ".dropped")
	st, err := h.sink.parseTarget(stale)
	if err != nil {
		t.Fatal(err)
	}
	pos := batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: 0x5000}}
	if _, err := h.sink.writeCheckpoint(t.Context(), st, stored{}, checkpoint{Position: &pos, Streaming: true}); err != nil {
		t.Fatal(err)
	}
	if err := h.sink.EnsureTable(t.Context(), stale); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	if p, ok, err := h.sink.Position(t.Context(), stale); err != nil || ok {
		t.Errorf("Position of the recreated target = %v, %v, %v; want none", p, ok, err)
	}
	if p, ok := h.position(); !ok || p.Position.IsZero() {
		t.Errorf("the other target's position was touched: %v, %v", p, ok)
	}
}

// TestPositionBeforeEnsureTable: a target whose scope has no metadata collection yet has no
// position, reported at once.
func TestPositionBeforeEnsureTable(t *testing.T) {
	t.Parallel()
	s := openSink(t, testConfig(t))
	start := time.Now()
	p, ok, err := s.Position(t.Context(), orders.Spec(testenv.RandomName("t")+".orders"))
	if err != nil || ok {
		t.Errorf("Position = %v, %v, %v; want none", p, ok, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Position took %s; it must not wait for a missing collection", d)
	}
}
