package clickhouse

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// ordersSpec is orders.Spec with __op materialized as source_op too.
func ordersSpec(target string) sinks.TableSpec {
	return orders.Spec(target, sinks.MetadataColumn{From: batch.MetaOp, As: "source_op"})
}

// row is the visible state of one key of ordersSpec's table.
type row struct {
	Name  string
	Qty   int32
	Price string
}

// rekey is an update that moves old's row to key id.
func rekey(old, id int64, name string, qty int) batch.Change {
	c := orders.Update(id, name, qty)
	null := batch.Value{Null: true}
	c.OldKey = []batch.Value{sinktest.Text(strconv.FormatInt(old, 10)), null, null, null}
	return c
}

// harness is a sink on the test ClickHouse with a fresh database, a table of ordersSpec, and the
// model of what the table must show.
type harness struct {
	t    *testing.T
	sink *Sink
	conn driver.Conn
	db   string
	spec sinks.TableSpec
	lsn  uint64
	seq  uint32 // next sequence in the current transaction
	// sameTxn makes the next batch continue the current transaction (same LSN), as when the
	// reader cuts one large transaction into several batches.
	sameTxn bool
	model   map[int64]row
	done    []sinks.Batch // committed batches, for replays
}

// newHarness connects a sink to addr (the shared test server when empty) with a fresh database.
func newHarness(t *testing.T, addr string) *harness {
	t.Helper()
	if addr == "" {
		addr = testenv.ClickHouse(t)
	}
	db := testenv.RandomName("sluice_test_")
	s, err := New(t.Context(), Config{Addr: addr, Database: db, ReadTimeout: config.Duration(30 * time.Second), DialTimeout: config.Duration(2 * time.Second)}, sinktest.Logger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.Native, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+quote(db))
		_ = conn.Close()
	})
	h := &harness{t: t, sink: s, conn: conn, db: db, spec: ordersSpec("orders"), lsn: 0x16B3748, model: map[int64]row{}}
	if err := s.EnsureTable(t.Context(), h.spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	return h
}

// batch builds the next batch of changes as the pipeline does: positions, collapse, record.
// Snapshot batches carry a zero Hi (rows only), as backfill chunks do.
func (h *harness) batch(phase batch.Phase, changes ...batch.Change) sinks.Batch {
	h.t.Helper()
	if h.sameTxn {
		h.sameTxn = false
	} else {
		h.lsn += 0x100
		h.seq = 0
	}
	first := h.seq
	for i := range changes {
		changes[i].Pos = batch.Position{LSN: h.lsn, Seq: first + uint32(i)}
		if changes[i].Op != batch.OpSnapshot {
			changes[i].CommitTS = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		}
	}
	h.seq += uint32(len(changes))
	h.model = applyModel(h.model, changes)
	col, err := batch.NewCollapser(h.spec.Schema)
	if err != nil {
		h.t.Fatal(err)
	}
	collapsed, err := col.Collapse(changes)
	if err != nil {
		h.t.Fatalf("Collapse: %v", err)
	}
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, h.spec.Schema)
	if err != nil {
		h.t.Fatalf("NewRecordBuilder: %v", err)
	}
	defer rb.Release()
	rec, err := rb.Build(collapsed, time.Now())
	if err != nil {
		h.t.Fatalf("Build: %v", err)
	}
	h.t.Cleanup(rec.Release)
	b := sinks.Batch{Spec: h.spec, Phase: phase, Record: rec,
		Lo: batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: h.lsn, Seq: first}},
		Hi: batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: h.lsn, Seq: max(h.seq, 1) - 1}}}
	if phase == batch.PhaseSnapshot {
		b.Lo, b.Hi = batch.SourcePosition{}, batch.SourcePosition{}
	}
	return b
}

// apply builds and applies a stream batch of changes.
func (h *harness) apply(changes ...batch.Change) sinks.Batch {
	h.t.Helper()
	b := h.batch(batch.PhaseStream, changes...)
	if err := h.sink.Apply(h.t.Context(), b); err != nil {
		h.t.Fatalf("Apply: %v", err)
	}
	h.done = append(h.done, b)
	return b
}

// applyModel applies changes in arrival order to a copy of m.
func applyModel(m map[int64]row, changes []batch.Change) map[int64]row {
	out := make(map[int64]row, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, c := range changes {
		id, _ := strconv.ParseInt(string(c.Values[0].Text), 10, 64)
		if c.OldKey != nil {
			old, _ := strconv.ParseInt(string(c.OldKey[0].Text), 10, 64)
			delete(out, old)
		}
		if c.Op == batch.OpDelete {
			delete(out, id)
			continue
		}
		qty, _ := strconv.Atoi(string(c.Values[2].Text))
		out[id] = row{Name: string(c.Values[1].Text), Qty: int32(qty), Price: string(c.Values[3].Text)}
	}
	return out
}

// query returns the visible rows of a SELECT of id, name, qty, toString(price).
func (h *harness) query(q string) map[int64]row {
	h.t.Helper()
	rows, err := h.conn.Query(h.t.Context(), q)
	if err != nil {
		h.t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	out := map[int64]row{}
	for rows.Next() {
		var (
			id    int64
			name  *string
			qty   *int32
			price *string
		)
		if err := rows.Scan(&id, &name, &qty, &price); err != nil {
			h.t.Fatalf("scanning %s: %v", q, err)
		}
		if _, dup := out[id]; dup {
			h.t.Fatalf("%s: key %d returned twice", q, id)
		}
		r := row{}
		if name != nil {
			r.Name = *name
		}
		if qty != nil {
			r.Qty = *qty
		}
		if price != nil {
			r.Price = *price
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// check compares the model with SELECT ... FINAL plus the tombstone filter and with the view,
// key by key.
func (h *harness) check(when string) {
	h.t.Helper()
	final := fmt.Sprintf("SELECT id, name, qty, toString(price) FROM %s.%s FINAL WHERE _is_deleted = 0", quote(h.db), quote(h.spec.Target))
	view := fmt.Sprintf("SELECT id, name, qty, toString(price) FROM %s.%s", quote(h.db), quote(h.spec.Target+ViewSuffix))
	for _, q := range []string{final, view} {
		if d := sinktest.DiffRows(h.model, h.query(q)); d != "" {
			h.t.Fatalf("%s: %s differs from the source:\n%s", when, q, d)
		}
	}
}

// position returns the sink's committed position of the harness table.
func (h *harness) position() (batch.SourcePosition, bool) {
	h.t.Helper()
	return sinktest.Position(h.t, h.sink, h.spec)
}

// count runs a count() query.
func (h *harness) count(q string) uint64 {
	h.t.Helper()
	var n uint64
	if err := h.conn.QueryRow(h.t.Context(), q).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", q, err)
	}
	return n
}
