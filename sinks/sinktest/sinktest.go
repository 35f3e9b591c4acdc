// Package sinktest is the conformance suite every sink runs: the contract of sinks.Sink as the
// committer relies on it (positions read back from the destination, atomic data and position,
// idempotent writes by key, deletes of missing keys, the backfill cases of Apply, discarding a
// partial snapshot, a column dropped from the target by hand, and for a sinks.Maintainer,
// maintenance that changes neither rows nor position). A sink's own tests call Run with a harness that opens the sink against its
// real service and reads back what a user would see.
package sinktest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// Row is the visible image of one row of the conformance table (id bigint key, name text,
// qty int4), as a user reading the destination sees it.
type Row struct {
	Name string
	Qty  int32
}

// Harness adapts one sink to the suite.
type Harness struct {
	// Open returns a sink connected to the real service. The suite closes it.
	Open func(t *testing.T) sinks.Sink
	// Target returns a fresh, unique target name for one test.
	Target func(t *testing.T) string
	// Read returns every visible row of the target by id (deleted rows are not visible; a target
	// that does not exist, as after DiscardSnapshot, has none). A key visible twice fails the test.
	// ids are every id the suite wrote to the target, for sinks that cannot list their rows (a
	// key-value store); sinks that can scan should scan, to find rows nobody asked for.
	Read func(t *testing.T, s sinks.Sink, spec sinks.TableSpec, ids []int64) map[int64]Row
	// Overtake makes s, a sink Open returned, call overtaken once in its next Apply, after it
	// has read the committed position and passed its guard and before it writes: the place where
	// a stale attempt (one that outlived its heartbeat timeout) is overtaken by the attempts that
	// replaced it. Nil skips the stale-attempt test.
	Overtake func(t *testing.T, s sinks.Sink, overtaken func(ctx context.Context))
	// DropColumn drops column from spec's target as an operator does by hand, with the
	// destination's own tools and outside the sink. Nil skips the dropped-column test (a
	// destination whose targets have no columns to drop).
	DropColumn func(t *testing.T, s sinks.Sink, spec sinks.TableSpec, column string)
	// HasColumn reports whether spec's target has column, as the destination lists its columns.
	// Required with DropColumn.
	HasColumn func(t *testing.T, s sinks.Sink, spec sinks.TableSpec, column string) bool
}

// Source is the source identity the suite's positions carry.
var Source = batch.SourceID{SystemID: "7400000000000000001", Timeline: 1, Slot: "sluice_sinktest"}

// Spec returns the conformance table's spec for target.
func Spec(target string) sinks.TableSpec {
	return sinks.TableSpec{
		Target: target,
		Schema: batch.Schema{
			Table: batch.TableName{Schema: "public", Name: "conformance"},
			Columns: []batch.Column{
				{Name: "id", TypeOID: 20, TypeName: "bigint", TypeMod: -1, NotNull: true, Key: true, Category: "N"},
				{Name: "name", TypeOID: 25, TypeName: "text", TypeMod: -1, Category: "S"},
				{Name: "qty", TypeOID: 23, TypeName: "integer", TypeMod: -1, Category: "N"},
			},
		},
		Metadata: []sinks.MetadataColumn{{From: batch.MetaCommitTS, As: "committed_at"}},
	}
}

// Upsert is an insert or update of id with name and qty at pos.
func Upsert(id int64, name string, qty int32, lsn uint64, seq uint32) batch.Change {
	return batch.Change{
		Op: batch.OpUpdate, Pos: batch.Position{LSN: lsn, Seq: seq}, CommitTS: time.Unix(1_700_000_000, 0).UTC(),
		Values: []batch.Value{Text(strconv.FormatInt(id, 10)), Text(name), Text(strconv.Itoa(int(qty)))},
	}
}

// Delete is a delete of id at pos.
func Delete(id int64, lsn uint64, seq uint32) batch.Change {
	return batch.Change{
		Op: batch.OpDelete, Pos: batch.Position{LSN: lsn, Seq: seq}, CommitTS: time.Unix(1_700_000_000, 0).UTC(),
		Values: []batch.Value{Text(strconv.FormatInt(id, 10)), {Null: true}, {Null: true}},
	}
}

// SnapshotRow is a row read by a snapshot at lsn.
func SnapshotRow(id int64, name string, qty int32, lsn uint64) batch.Change {
	c := Upsert(id, name, qty, lsn, 0)
	c.Op, c.CommitTS = batch.OpSnapshot, time.Time{}
	return c
}

// Batch builds a sinks.Batch of changes with watermark hi (zero: a snapshot chunk).
func Batch(t *testing.T, spec sinks.TableSpec, phase batch.Phase, hi batch.Position, changes ...batch.Change) sinks.Batch {
	t.Helper()
	b, err := batch.NewRecordBuilder(memory.DefaultAllocator, spec.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	rec, err := b.Build(changes, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Release)
	out := sinks.Batch{Spec: spec, Phase: phase, Record: rec}
	if !hi.IsZero() {
		lo := hi
		if len(changes) > 0 {
			lo = changes[0].Pos
		}
		out.Lo = batch.SourcePosition{Source: Source, Position: lo}
		out.Hi = batch.SourcePosition{Source: Source, Position: hi}
	}
	return out
}

// Run runs the conformance suite against the sink h opens.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec)
	}{
		{"new table has no position", testNoPosition},
		{"apply writes rows and position together", testApply},
		{"updates deletes and missing keys", testUpsertDelete},
		{"re-applying a batch changes nothing", testReapply},
		{"snapshot chunks keep the position until the end", testSnapshotChunks},
		{"discard removes a partial snapshot", testDiscard},
		{"ensure table is idempotent", testEnsureTwice},
		{"maintenance keeps rows and position", testMaintain},
		{"a stale attempt writes nothing older", testStaleAttempt},
		{"a column dropped by hand is poison until a resync", testColumnDroppedByHand},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s := h.Open(t)
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			spec := Spec(h.Target(t))
			if err := s.EnsureTable(ctx, spec); err != nil {
				t.Fatalf("EnsureTable(%s): %v", spec.Target, err)
			}
			tc.run(t, ctx, &checked{Sink: s, t: t, h: h, ids: map[int64]bool{}}, spec)
		})
	}
}

// checked carries the harness so the tests can read back.
type checked struct {
	sinks.Sink
	t   *testing.T
	h   Harness
	ids map[int64]bool // every id written
}

func (c *checked) rows(spec sinks.TableSpec) map[int64]Row {
	ids := make([]int64, 0, len(c.ids))
	for id := range c.ids {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return c.h.Read(c.t, c.Sink, spec, ids)
}

// Apply records the ids of the batch, then applies it.
func (c *checked) Apply(ctx context.Context, b sinks.Batch) error {
	if col, ok := b.Record.Column(0).(*array.Int64); ok {
		for i := 0; i < col.Len(); i++ {
			c.ids[col.Value(i)] = true
		}
	}
	return c.Sink.Apply(ctx, b)
}

func rowsOf(s sinks.Sink, spec sinks.TableSpec) map[int64]Row { return s.(*checked).rows(spec) }

func wantRows(t *testing.T, s sinks.Sink, spec sinks.TableSpec, want map[int64]Row) {
	t.Helper()
	got := rowsOf(s, spec)
	for id, w := range want {
		g, ok := got[id]
		switch {
		case !ok:
			t.Errorf("id %d: missing, want %+v", id, w)
		case g != w:
			t.Errorf("id %d: got %+v, want %+v", id, g, w)
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("id %d: extra row %+v", id, g)
		}
	}
}

func wantPosition(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec, want batch.Position, wantOK bool) {
	t.Helper()
	pos, ok, err := s.Position(ctx, spec)
	if err != nil {
		t.Fatalf("Position: %v", err)
	}
	if ok != wantOK || (ok && (pos.Position != want || pos.Source != Source)) {
		t.Fatalf("Position = %v, %v; want %v, %v", pos, ok, batch.SourcePosition{Source: Source, Position: want}, wantOK)
	}
}

func apply(t *testing.T, ctx context.Context, s sinks.Sink, b sinks.Batch) {
	t.Helper()
	if err := s.Apply(ctx, b); err != nil {
		t.Fatalf("Apply(%s..%s): %v", b.Lo, b.Hi, err)
	}
}

func testNoPosition(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec) {
	wantPosition(t, ctx, s, spec, batch.Position{}, false)
	wantRows(t, s, spec, map[int64]Row{})
}

func testApply(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec) {
	hi := batch.Position{LSN: 0x1000, Seq: 5}
	var changes []batch.Change
	want := map[int64]Row{}
	for i := int64(1); i <= 5; i++ {
		changes = append(changes, Upsert(i, fmt.Sprintf("n%d", i), int32(i*10), 0x1000, uint32(i)))
		want[i] = Row{Name: fmt.Sprintf("n%d", i), Qty: int32(i * 10)}
	}
	apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, hi, changes...))
	wantRows(t, s, spec, want)
	wantPosition(t, ctx, s, spec, hi, true)
}

func testUpsertDelete(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec) {
	apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x1000, Seq: 3},
		Upsert(1, "a", 1, 0x1000, 1), Upsert(2, "b", 2, 0x1000, 2), Upsert(3, "c", 3, 0x1000, 3)))
	hi := batch.Position{LSN: 0x2000, Seq: 4}
	apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, hi,
		Upsert(2, "b2", 22, 0x2000, 1), Delete(3, 0x2000, 2), Delete(999, 0x2000, 3), Upsert(4, "d", 4, 0x2000, 4)))
	wantRows(t, s, spec, map[int64]Row{1: {"a", 1}, 2: {"b2", 22}, 4: {"d", 4}})
	wantPosition(t, ctx, s, spec, hi, true)
	// A deleted key inserted again is visible once, with its new image.
	hi = batch.Position{LSN: 0x3000, Seq: 1}
	apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, hi, Upsert(3, "c-again", 33, 0x3000, 1)))
	wantRows(t, s, spec, map[int64]Row{1: {"a", 1}, 2: {"b2", 22}, 3: {"c-again", 33}, 4: {"d", 4}})
	wantPosition(t, ctx, s, spec, hi, true)
}

func testReapply(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec) {
	first := Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x1000, Seq: 2},
		Upsert(1, "a", 1, 0x1000, 1), Upsert(2, "b", 2, 0x1000, 2))
	second := Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x2000, Seq: 2},
		Upsert(1, "a2", 11, 0x2000, 1), Delete(2, 0x2000, 2))
	apply(t, ctx, s, first)
	apply(t, ctx, s, second)
	apply(t, ctx, s, second) // a redelivered batch the committer did not skip
	wantRows(t, s, spec, map[int64]Row{1: {"a2", 11}})
	wantPosition(t, ctx, s, spec, batch.Position{LSN: 0x2000, Seq: 2}, true)
}

func testSnapshotChunks(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec) {
	const snap = 0x5000
	chunk1 := Batch(t, spec, batch.PhaseSnapshot, batch.Position{}, SnapshotRow(1, "a", 1, snap), SnapshotRow(2, "b", 2, snap))
	chunk2 := Batch(t, spec, batch.PhaseSnapshot, batch.Position{}, SnapshotRow(2, "b", 2, snap), SnapshotRow(3, "c", 3, snap))
	apply(t, ctx, s, chunk1)
	wantPosition(t, ctx, s, spec, batch.Position{}, false)
	apply(t, ctx, s, chunk1) // a chunk retried after a lost reply
	apply(t, ctx, s, chunk2) // overlapping the previous chunk by one key
	wantPosition(t, ctx, s, spec, batch.Position{}, false)
	end := Batch(t, spec, batch.PhaseSnapshot, batch.Position{LSN: snap})
	apply(t, ctx, s, end)
	wantRows(t, s, spec, map[int64]Row{1: {"a", 1}, 2: {"b", 2}, 3: {"c", 3}})
	wantPosition(t, ctx, s, spec, batch.Position{LSN: snap}, true)
	// The stream after the snapshot.
	hi := batch.Position{LSN: snap + 0x100, Seq: 2}
	apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, hi, Delete(1, snap+0x100, 1), Upsert(2, "b2", 22, snap+0x100, 2)))
	wantRows(t, s, spec, map[int64]Row{2: {"b2", 22}, 3: {"c", 3}})
	wantPosition(t, ctx, s, spec, hi, true)
}

func testDiscard(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec) {
	apply(t, ctx, s, Batch(t, spec, batch.PhaseSnapshot, batch.Position{}, SnapshotRow(1, "a", 1, 0x5000), SnapshotRow(2, "b", 2, 0x5000)))
	for i := 0; i < 2; i++ {
		if err := s.DiscardSnapshot(ctx, spec); err != nil {
			t.Fatalf("DiscardSnapshot (call %d): %v", i+1, err)
		}
		wantRows(t, s, spec, map[int64]Row{})
		wantPosition(t, ctx, s, spec, batch.Position{}, false)
	}
	// The table takes a new snapshot after the discard.
	if err := s.EnsureTable(ctx, spec); err != nil {
		t.Fatalf("EnsureTable after discard: %v", err)
	}
	apply(t, ctx, s, Batch(t, spec, batch.PhaseSnapshot, batch.Position{}, SnapshotRow(7, "g", 7, 0x6000)))
	apply(t, ctx, s, Batch(t, spec, batch.PhaseSnapshot, batch.Position{LSN: 0x6000}))
	wantRows(t, s, spec, map[int64]Row{7: {"g", 7}})
	wantPosition(t, ctx, s, spec, batch.Position{LSN: 0x6000}, true)
}

func testEnsureTwice(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec) {
	apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x1000, Seq: 1}, Upsert(1, "a", 1, 0x1000, 1)))
	if err := s.EnsureTable(ctx, spec); err != nil {
		t.Fatalf("second EnsureTable: %v", err)
	}
	wantRows(t, s, spec, map[int64]Row{1: {"a", 1}})
	wantPosition(t, ctx, s, spec, batch.Position{LSN: 0x1000, Seq: 1}, true)
}

func testMaintain(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec) {
	m, ok := s.(*checked).Sink.(sinks.Maintainer)
	if !ok {
		t.Skip("the sink has no table maintenance")
	}
	want := map[int64]Row{}
	var hi batch.Position
	for i := range int64(6) {
		lsn := uint64(0x1000 * (i + 1))
		changes := []batch.Change{Upsert(i+1, fmt.Sprint("n", i), int32(i), lsn, 1), Upsert(0, fmt.Sprint("z", i), int32(i), lsn, 2)}
		want[i+1], want[0] = Row{fmt.Sprint("n", i), int32(i)}, Row{fmt.Sprint("z", i), int32(i)}
		if i%2 == 1 { // delete the key the previous batch inserted
			changes = append(changes, Delete(i, lsn, 3))
			delete(want, i)
		}
		hi = changes[len(changes)-1].Pos
		apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, hi, changes...))
	}
	for i := range 2 { // idempotent
		if _, err := m.Maintain(ctx, spec); err != nil {
			t.Fatalf("Maintain (call %d): %v", i+1, err)
		}
		wantRows(t, s, spec, want)
		wantPosition(t, ctx, s, spec, hi, true)
	}
	// The table takes commits after maintenance.
	hi = batch.Position{LSN: 0x9000, Seq: 1}
	apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, hi, Upsert(100, "after", 1, 0x9000, 1)))
	want[100] = Row{"after", 1}
	wantRows(t, s, spec, want)
	wantPosition(t, ctx, s, spec, hi, true)
}

// testStaleAttempt applies batch N through a second sink instance exactly as a stale attempt
// would: it reads the position (before N) and passes its guard, then the attempts that replaced
// it commit N and N+1, and only then does it write N. N+1 deletes K (which N inserts), deletes
// K2 (which existed before N) and updates J (which N updates): K and K2 stay absent and J keeps
// N+1's value, whatever the stale attempt's Apply returns; L, which only N writes, has N's image.
func testStaleAttempt(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec) {
	c := s.(*checked)
	if c.h.Overtake == nil {
		t.Skip("the harness cannot pause a sink between its guard and its write")
	}
	const j, k, k2, l = 1, 2, 3, 4
	apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x1000, Seq: 2},
		Upsert(j, "j0", 10, 0x1000, 1), Upsert(k2, "k2-0", 30, 0x1000, 2)))
	insertK := Upsert(k, "k-n", 20, 0x2000, 1)
	insertK.Op = batch.OpInsert
	n := Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x2000, Seq: 4},
		insertK, Upsert(j, "j-n", 11, 0x2000, 2), Upsert(k2, "k2-n", 31, 0x2000, 3),
		Upsert(l, "l-n", 40, 0x2000, 4))
	next := Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x3000, Seq: 3},
		Delete(k, 0x3000, 1), Upsert(j, "j-n1", 12, 0x3000, 2), Delete(k2, 0x3000, 3))

	raw := c.h.Open(t)
	t.Cleanup(func() { _ = raw.Close(context.Background()) })
	overtaken := false
	c.h.Overtake(t, raw, func(ctx context.Context) {
		overtaken = true
		apply(t, ctx, s, n) // the retry that replaced the stale attempt
		apply(t, ctx, s, next)
	})
	stale := &checked{Sink: raw, t: t, h: c.h, ids: c.ids}
	err := stale.Apply(ctx, n)
	if !overtaken {
		t.Fatalf("the stale Apply (error %v) never reached the point where it is overtaken", err)
	}
	t.Logf("the stale attempt's Apply returned %v", err)
	wantRows(t, s, spec, map[int64]Row{j: {"j-n1", 12}, l: {"l-n", 40}})
	wantPosition(t, ctx, s, spec, next.Hi.Position, true)
}

// testColumnDroppedByHand: a column an operator dropped from the target is not added back while
// the table holds rows (they lost its values), while a column the source adds still is; the next
// batch is poison naming the table, the column and both remedies; once the table is emptied
// (DiscardSnapshot, a resync's first step) EnsureTable adds the column back and the table takes
// rows again.
func testColumnDroppedByHand(t *testing.T, ctx context.Context, s sinks.Sink, spec sinks.TableSpec) {
	c := s.(*checked)
	if c.h.DropColumn == nil {
		t.Skip("the harness cannot drop a column of the target by hand")
	}
	if c.h.HasColumn == nil {
		t.Fatal("the harness sets DropColumn without HasColumn")
	}
	has := func(column string) bool { return c.h.HasColumn(t, c.Sink, spec, column) }
	apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x1000, Seq: 1}, Upsert(1, "a", 1, 0x1000, 1)))
	c.h.DropColumn(t, c.Sink, spec, "qty")

	added := spec
	added.Schema.Columns = append(slices.Clone(spec.Schema.Columns), batch.Column{Name: "note", TypeOID: 25, TypeName: "text", TypeMod: -1, Category: "S"})
	if err := s.EnsureTable(ctx, added); err != nil {
		t.Fatalf("EnsureTable after the operator's drop: %v", err)
	}
	if has("qty") {
		t.Fatal("EnsureTable added qty back to a table whose rows lost its values")
	}
	if !has("note") {
		t.Fatal("EnsureTable did not add column note, which the source added")
	}

	err := s.Apply(ctx, Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x2000, Seq: 1}, Upsert(1, "a2", 2, 0x2000, 1)))
	if !sinks.IsPoison(err) {
		t.Fatalf("Apply of a batch carrying the dropped column: %v, want poison", err)
	}
	tbl := spec.Schema.Table.String()
	for _, want := range []string{tbl, "no column qty", "sluice resync --table " + tbl, "add the column back"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the poison error does not say %q: %v", want, err)
		}
	}

	if err := s.DiscardSnapshot(ctx, spec); err != nil {
		t.Fatalf("DiscardSnapshot: %v", err)
	}
	if err := s.EnsureTable(ctx, spec); err != nil {
		t.Fatalf("EnsureTable of the emptied table: %v", err)
	}
	if !has("qty") {
		t.Fatal("EnsureTable did not add qty back to the emptied table")
	}
	hi := batch.Position{LSN: 0x3000, Seq: 1}
	apply(t, ctx, s, Batch(t, spec, batch.PhaseStream, hi, Upsert(1, "a3", 3, 0x3000, 1)))
	wantRows(t, s, spec, map[int64]Row{1: {"a3", 3}})
	wantPosition(t, ctx, s, spec, hi, true)
}
