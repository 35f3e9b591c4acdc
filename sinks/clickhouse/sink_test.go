package clickhouse

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
)

// TestBackfillThenStream runs a backfill (chunks without a position, then the snapshot's
// position alone) and a stream of upserts, deletes, key changes and re-inserts, comparing the
// source with SELECT ... FINAL (tombstone filter) and the view after every commit.
func TestBackfillThenStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	if _, ok := h.position(); ok {
		t.Fatal("a new table has a position")
	}
	// Backfill: two chunks, rows only.
	for _, chunk := range [][]batch.Change{
		{orders.Snapshot(1, "a", 1), orders.Snapshot(2, "b", 2), orders.Snapshot(3, "c", 3)},
		{orders.Snapshot(4, "d", 4), orders.Snapshot(5, "e", 5)},
	} {
		b := h.batch(batch.PhaseSnapshot, chunk...)
		if err := h.sink.Apply(t.Context(), b); err != nil {
			t.Fatalf("Apply snapshot chunk: %v", err)
		}
		if _, ok := h.position(); ok {
			t.Fatal("a snapshot chunk moved the position")
		}
	}
	h.check("after the backfill chunks")
	// The end of the backfill commits the snapshot's position alone.
	end := batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: h.lsn}}
	if err := h.sink.Apply(t.Context(), sinks.Batch{Spec: h.spec, Phase: batch.PhaseSnapshot, Hi: end}); err != nil {
		t.Fatalf("Apply end of snapshot: %v", err)
	}
	if p, ok := h.position(); !ok || p != end {
		t.Fatalf("position after the backfill: %v %v, want %v", p, ok, end)
	}

	steps := []struct {
		name    string
		changes []batch.Change
	}{
		{"upserts", []batch.Change{orders.Update(1, "a2", 10), orders.Insert(6, "f", 6), orders.Update(6, "f2", 60)}},
		{"deletes", []batch.Change{orders.Delete(2), orders.Delete(6), orders.Delete(99)}},
		{"key change", []batch.Change{rekey(3, 30, "c moved", 33)}},
		{"key change and back in one batch", []batch.Change{rekey(4, 40, "d moved", 44), rekey(40, 4, "d back", 45)}},
		{"re-insert a deleted key", []batch.Change{orders.Insert(2, "b again", 20)}},
		{"delete and re-insert in one batch", []batch.Change{orders.Delete(5), orders.Insert(5, "e again", 50)}},
		{"insert then delete in one batch", []batch.Change{orders.Insert(7, "g", 7), orders.Delete(7)}},
	}
	for _, s := range steps {
		b := h.apply(s.changes...)
		h.check("after " + s.name)
		if p, ok := h.position(); !ok || p != b.Hi {
			t.Fatalf("after %s: position %v %v, want %v", s.name, p, ok, b.Hi)
		}
	}
	// Merging every part must not change what is visible nor the position.
	pos, _ := h.position()
	if err := h.conn.Exec(t.Context(), fmt.Sprintf("OPTIMIZE TABLE %s.orders FINAL", quote(h.db))); err != nil {
		t.Fatal(err)
	}
	h.check("after OPTIMIZE FINAL")
	if p, ok := h.position(); !ok || p != pos {
		t.Fatalf("position after OPTIMIZE FINAL: %v %v, want %v", p, ok, pos)
	}
	// Position needs only the target: LoadTable may ask before the schema is known.
	bare := sinks.TableSpec{Target: h.spec.Target, Schema: batch.Schema{Table: h.spec.Schema.Table}}
	if p, ok, err := h.sink.Position(t.Context(), bare); err != nil || !ok || p != pos {
		t.Fatalf("Position of a spec without columns: %v %v %v, want %v", p, ok, err, pos)
	}
	// Deleted then re-inserted keys are visible once; tombstones stay as rows but are hidden.
	if n := h.count(fmt.Sprintf("SELECT count() FROM %s.orders FINAL WHERE _is_deleted = 0 AND id = 2", quote(h.db))); n != 1 {
		t.Errorf("key 2 is visible %d times, want once", n)
	}
}

// TestReplay re-applies every committed batch: nothing visible changes and the position stays.
// A backfill chunk applied late (after the stream deleted one of its keys) cannot resurrect the
// key either: its version (the snapshot LSN) is older than the delete's.
func TestReplay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	first := h.batch(batch.PhaseSnapshot, orders.Snapshot(1, "a", 1), orders.Snapshot(2, "b", 2), orders.Snapshot(3, "c", 3))
	if err := h.sink.Apply(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	h.apply(orders.Update(1, "a2", 11))
	h.apply(orders.Delete(2))
	h.apply(orders.Insert(4, "d", 4), orders.Delete(3))
	h.apply(orders.Insert(3, "c again", 33))
	h.check("before replays")
	pos, _ := h.position()
	for i, b := range h.done {
		if err := h.sink.Apply(t.Context(), b); err != nil {
			t.Fatalf("replaying batch %d: %v", i, err)
		}
		h.check(fmt.Sprintf("after replaying batch %d", i))
		if p, _ := h.position(); p != pos {
			t.Fatalf("replaying batch %d moved the position to %v, want %v", i, p, pos)
		}
	}
	// The backfill chunk arrives again after the stream deleted key 2 and re-inserted key 3.
	if err := h.sink.Apply(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	h.check("after replaying the backfill chunk")
}

// TestTransactionSplitOverBatches: one transaction cut into several batches shares its commit
// LSN, so its rows have equal versions; the later batch must win, in separate parts and after
// merges.
func TestTransactionSplitOverBatches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	h.apply(orders.Insert(1, "a", 1), orders.Insert(2, "b", 2))
	h.apply(orders.Update(1, "a in txn", 10), orders.Insert(3, "c in txn", 3))
	h.sameTxn = true
	h.apply(orders.Delete(1), orders.Update(3, "c later in txn", 30))
	h.sameTxn = true
	h.apply(orders.Insert(1, "a back in txn", 100), orders.Delete(2))
	h.check("after the split transaction")
	if err := h.conn.Exec(t.Context(), fmt.Sprintf("OPTIMIZE TABLE %s.orders FINAL", quote(h.db))); err != nil {
		t.Fatal(err)
	}
	h.check("after OPTIMIZE FINAL")
	pos, _ := h.position()
	if want := h.done[len(h.done)-1].Hi; pos != want {
		t.Fatalf("position %v, want %v", pos, want)
	}
}

// TestTypesRoundTrip writes one row of every mapped type to the old server and reads it back.
func TestTypesRoundTrip(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	h.spec = typesSpec("types")
	if err := h.sink.EnsureTable(t.Context(), h.spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	values := []string{"7", "eu", "-3", "42", "1.5", "2.25", "1234.50", "3.14159265358979323846264338327950288419",
		"t", `{"a": [1, 2]}`, `\x00ff10`, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "1999-12-31", "2024-02-29 12:34:56.789",
		"2024-02-29 12:34:56.789+02", "13:05:09.12", "1 year 2 mons -3 days +04:05:06.5", `{x,"y z",NULL}`, "{1,NULL,3}"}
	c := batch.Change{Op: batch.OpInsert}
	for _, v := range values {
		c.Values = append(c.Values, sinktest.Text(v))
	}
	null := batch.Change{Op: batch.OpInsert, Values: make([]batch.Value, len(values))}
	for i := range null.Values {
		null.Values[i] = batch.Value{Null: true}
	}
	null.Values[0], null.Values[1] = sinktest.Text("8"), sinktest.Text("us")
	h.apply(c, null)

	q := fmt.Sprintf(`SELECT toString(small), toString(qty), toString(ratio), toString(score), toString(price), exact,
		toString(ok), doc, hex(blob), toString(uid), toString(born), toString(at), toString(atz), clock, span,
		toString(tags), toString(nums), source_op FROM %s.types_current ORDER BY id`, quote(h.db))
	rows, err := h.conn.Query(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		vals := make([]*string, 18)
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals {
			if v == nil {
				parts = append(parts, "NULL")
			} else {
				parts = append(parts, *v)
			}
		}
		got = append(got, strings.Join(parts, " | "))
	}
	want := []string{
		`-3 | 42 | 1.5 | 2.25 | 1234.50 | 3.14159265358979323846264338327950288419 | 1 | {"a": [1, 2]} | 00FF10 | ` +
			`a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 | 1999-12-31 | 2024-02-29 12:34:56 | 2024-02-29 10:34:56 | 13:05:09.12 | ` +
			`P1Y2M-3DT4H5M6.5S | ['x','y z',NULL] | [1,NULL,3] | insert`,
		`NULL | NULL | NULL | NULL | NULL | NULL | NULL | NULL | NULL | NULL | NULL | NULL | NULL | NULL | NULL | [] | [] | insert`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("round trip:\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOutOfRangeIsPoison: a 1967 date cannot be stored in the old server's Date; the batch stops
// as poison naming the column and value, and nothing of it is written.
func TestOutOfRangeIsPoison(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	h.spec = typesSpec("types")
	if err := h.sink.EnsureTable(t.Context(), h.spec); err != nil {
		t.Fatal(err)
	}
	mk := func(id, born string) batch.Change {
		c := batch.Change{Op: batch.OpInsert, Values: make([]batch.Value, len(h.spec.Schema.Columns))}
		for i := range c.Values {
			c.Values[i] = batch.Value{Null: true}
		}
		c.Values[0], c.Values[1], c.Values[12] = sinktest.Text(id), sinktest.Text("eu"), sinktest.Text(born)
		return c
	}
	ok := h.apply(mk("1", "1999-01-01"))
	b := h.batch(batch.PhaseStream, mk("2", "2000-01-01"), mk("3", "1967-05-01"))
	err := h.sink.Apply(t.Context(), b)
	if !sinks.IsPoison(err) || !strings.Contains(err.Error(), `column "born"`) || !strings.Contains(err.Error(), "1967-05-01") {
		t.Fatalf("Apply: got %v, want poison naming column born and the value", err)
	}
	t.Logf("poison: %v", err)
	if n := h.count(fmt.Sprintf("SELECT count() FROM %s.types WHERE _sluice_marker = 0", quote(h.db))); n != 1 {
		t.Errorf("%d rows written, want only the first batch's 1", n)
	}
	if p, _ := h.position(); p != ok.Hi {
		t.Errorf("position %v, want %v", p, ok.Hi)
	}
}

// TestEnsureTableEvolves adds a source column and a metadata column, and refuses a type change
// and a key change.
func TestEnsureTableEvolves(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	h.apply(orders.Insert(1, "a", 1))
	if err := h.sink.EnsureTable(t.Context(), h.spec); err != nil {
		t.Fatalf("EnsureTable again: %v", err)
	}
	spec := ordersSpec("orders")
	spec.Schema.Columns = append(spec.Schema.Columns, batch.Column{Name: "note", TypeOID: 25, TypeName: "text"})
	spec.Metadata = append(spec.Metadata, sinks.MetadataColumn{From: "pos", As: "source_pos"})
	if err := h.sink.EnsureTable(t.Context(), spec); err != nil {
		t.Fatalf("EnsureTable with new columns: %v", err)
	}
	h.spec = spec
	c := orders.Insert(2, "b", 2)
	c.Values = append(c.Values, sinktest.Text("hello"))
	b := h.apply(c)
	var note, pos string
	q := fmt.Sprintf("SELECT note, source_pos FROM %s.orders_current WHERE id = 2", quote(h.db))
	if err := h.conn.QueryRow(t.Context(), q).Scan(&note, &pos); err != nil {
		t.Fatalf("the view does not show the new columns: %v", err)
	}
	if note != "hello" || pos != b.Hi.Position.String() {
		t.Errorf("got note %q pos %q", note, pos)
	}
	if n := h.count(fmt.Sprintf("SELECT count() FROM %s.orders_current WHERE note IS NULL", quote(h.db))); n != 1 {
		t.Errorf("old rows: %d with a NULL note, want 1", n)
	}

	changed := ordersSpec("orders")
	changed.Schema.Columns[2].TypeOID, changed.Schema.Columns[2].TypeName = 25, "text" // a widening is applied (TestEnsureTableWidens)
	if err := h.sink.EnsureTable(t.Context(), changed); !sinks.IsPoison(err) || !strings.Contains(err.Error(), `column "qty" is Nullable(Int32)`) {
		t.Errorf("type change: got %v, want poison", err)
	}
	rekeyed := ordersSpec("orders")
	rekeyed.Schema.Columns[1].Key = true
	if err := h.sink.EnsureTable(t.Context(), rekeyed); !sinks.IsPoison(err) || !strings.Contains(err.Error(), "sorting key") {
		t.Errorf("key change: got %v, want poison", err)
	}
}

// TestUnknownColumnIsPoison: a batch carrying a column the table lacks (EnsureTable not run) is
// poison from the server.
func TestUnknownColumnIsPoison(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	h.spec.Schema.Columns = append(h.spec.Schema.Columns, batch.Column{Name: "note", TypeOID: 25, TypeName: "text"})
	c := orders.Insert(1, "a", 1)
	c.Values = append(c.Values, sinktest.Text("x"))
	err := h.sink.Apply(t.Context(), h.batch(batch.PhaseStream, c))
	if !sinks.IsPoison(err) {
		t.Fatalf("Apply: got %v, want poison", err)
	}
	t.Logf("poison: %v", err)
}

// TestDiscardSnapshot empties a partly backfilled table and its position.
func TestDiscardSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	if err := h.sink.Apply(t.Context(), h.batch(batch.PhaseSnapshot, orders.Snapshot(1, "a", 1), orders.Snapshot(2, "b", 2))); err != nil {
		t.Fatal(err)
	}
	h.apply(orders.Update(1, "a2", 2))
	for i := 0; i < 2; i++ {
		if err := h.sink.DiscardSnapshot(t.Context(), h.spec); err != nil {
			t.Fatalf("DiscardSnapshot #%d: %v", i+1, err)
		}
	}
	h.model = map[int64]row{}
	h.check("after DiscardSnapshot")
	if p, ok := h.position(); ok {
		t.Fatalf("position after DiscardSnapshot: %v", p)
	}
	missing := ordersSpec("nothere")
	if err := h.sink.DiscardSnapshot(t.Context(), missing); err != nil {
		t.Errorf("DiscardSnapshot of a missing table: %v", err)
	}
	if _, ok, err := h.sink.Position(t.Context(), missing); ok || err != nil {
		t.Errorf("Position of a missing table: %v %v", ok, err)
	}
}

// TestPositionOfTwoSourcesIsPoison: markers of two sources have no order.
func TestPositionOfTwoSourcesIsPoison(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	h.apply(orders.Insert(1, "a", 1))
	q := fmt.Sprintf("INSERT INTO %s.orders (id, _version, _is_deleted, _sluice_marker, _sluice_position) SELECT 0, 1, 1, 1, '%s'",
		quote(h.db), batch.SourcePosition{Source: batch.SourceID{SystemID: "other", Timeline: 1, Slot: "s"}, Position: batch.Position{LSN: 1}})
	if err := h.conn.Exec(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	_, _, err := h.sink.Position(t.Context(), h.spec)
	if !sinks.IsPoison(err) || !strings.Contains(err.Error(), "two sources") {
		t.Fatalf("Position: got %v, want poison about two sources", err)
	}
}

// TestModernRefusedOnOldServer: asking for the modern layout on 18.16 is refused at start.
func TestModernRefusedOnOldServer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	if h.sink.Version().SupportsModern() {
		t.Skipf("server %s supports the modern layout", h.sink.Version())
	}
	_, err := New(t.Context(), Config{Addr: h.sink.cfg.Addr, Schema: config.SchemaModern}, sinktest.Logger(t))
	if !sinks.IsPoison(err) || !strings.Contains(err.Error(), "upgrade the server or set sink.clickhouse.schema to compatible") {
		t.Fatalf("New with schema modern: got %v", err)
	}
	t.Logf("refused: %v", err)
}

// TestConcurrentEnsureTable: several workers create and evolve the same table at once.
func TestConcurrentEnsureTable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "")
	spec := ordersSpec("shared")
	spec.Schema.Columns = append(spec.Schema.Columns, batch.Column{Name: "note", TypeOID: 25, TypeName: "text"})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := New(t.Context(), h.sink.cfg, sinktest.Logger(t))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close(t.Context())
			if err := s.EnsureTable(t.Context(), ordersSpec("shared")); err != nil {
				errs <- err
				return
			}
			errs <- s.EnsureTable(t.Context(), spec)
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("EnsureTable: %v", err)
		}
	}
	if n := h.count(fmt.Sprintf("SELECT count() FROM system.columns WHERE database = '%s' AND table = 'shared_current' AND name = 'note'", h.db)); n != 1 {
		t.Errorf("the view lacks the new column")
	}
}
