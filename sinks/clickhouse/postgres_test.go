package clickhouse

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestFromPostgres replicates a real Postgres table: a backfill read under an exported snapshot
// while the table is being changed (updates, deletes, key changes, re-inserts), then the stream
// of those changes from the slot, one commit per transaction. Postgres' rows must equal
// SELECT ... FINAL (tombstone filter) and the view key by key, and replaying the stream changes
// nothing.
func TestFromPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	ctx := t.Context()
	dsn := testenv.NewDatabase(t)
	pg, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close(context.Background()) })
	exec := func(sql string) {
		t.Helper()
		if _, err := pg.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE SCHEMA shop")
	exec("CREATE TABLE shop.orders (id bigint PRIMARY KEY, name text, qty integer, price numeric(12,2))")
	exec("INSERT INTO shop.orders SELECT g, 'row ' || g, g, g * 1.5 FROM generate_series(1, 2000) g")

	name := testenv.RandomName("sluice_ch_")
	cfg := source.Config{DSN: dsn, Slot: name, Publication: name,
		Tables: []source.TableConfig{{Table: batch.TableName{Schema: "shop", Name: "orders"}}}}
	info, err := source.Setup(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("source setup: %v", err)
	}
	h := newHarness(t, "")
	h.spec = sinks.TableSpec{Target: "pgorders", Schema: info.Schemas[0],
		Metadata: []sinks.MetadataColumn{{From: "commit_ts", As: "committed_at"}}}
	if err := h.sink.EnsureTable(ctx, h.spec); err != nil {
		t.Fatal(err)
	}

	// Backfill, with the table changing between chunks.
	snap, err := source.OpenSnapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(context.Background())
	var after []batch.Value
	chunk := func() bool {
		t.Helper()
		rows, err := snap.ReadChunk(ctx, h.spec.Schema, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) > 0 {
			after = rows[len(rows)-1].Values
			h.applyChanges(batch.PhaseSnapshot, rows)
		}
		return len(rows) == 500
	}
	chunk()
	for _, sql := range []string{
		"UPDATE shop.orders SET qty = qty + 1000, name = 'updated' WHERE id % 7 = 0",
		"DELETE FROM shop.orders WHERE id % 11 = 0",
		"UPDATE shop.orders SET id = id + 100000 WHERE id IN (3, 1500)",
		"INSERT INTO shop.orders SELECT g, 'new', g, g FROM generate_series(5000, 5100) g",
		"BEGIN; DELETE FROM shop.orders WHERE id = 4; INSERT INTO shop.orders VALUES (4, 're-inserted', 4, 4); COMMIT",
		"DELETE FROM shop.orders WHERE id = 8",
		"INSERT INTO shop.orders VALUES (8, 'back', 8, 8)",
		"UPDATE shop.orders SET price = NULL, name = NULL WHERE id = 1999",
	} {
		exec(sql)
	}
	for chunk() {
	}
	end := batch.SourcePosition{Source: info.ID, Position: batch.Position{LSN: snap.LSN()}}
	if err := h.sink.Apply(ctx, sinks.Batch{Spec: h.spec, Phase: batch.PhaseSnapshot, Hi: end}); err != nil {
		t.Fatalf("committing the snapshot position: %v", err)
	}

	// Stream from the slot, one commit per transaction, until the WAL written so far.
	var until string
	if err := pg.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&until); err != nil {
		t.Fatal(err)
	}
	untilPos, err := batch.ParsePosition(until + ":0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := source.NewStream(cfg, source.StreamOptions{Schemas: info.Schemas,
		Safe:           func() (batch.Position, bool) { return batch.Position{}, false },
		StatusInterval: 100 * time.Millisecond, ProgressInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var txn []batch.Change
	var stream []sinks.Batch
	errDone := errors.New("caught up")
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = r.Run(rctx, func(ctx context.Context, ev source.Event) error {
		switch e := ev.(type) {
		case *source.ChangeEvent:
			if e.Change.Pos.LSN >= snap.LSN() { // earlier commits are in the snapshot
				txn = append(txn, e.Change)
			}
		case *source.CommitEvent:
			if len(txn) > 0 {
				stream = append(stream, h.applyChanges(batch.PhaseStream, txn))
				txn = nil
			}
			if e.EndLSN >= untilPos.LSN {
				return errDone
			}
		case *source.ProgressEvent:
			if e.StreamLSN >= untilPos.LSN {
				return errDone
			}
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("stream: %v", err)
	}
	if len(stream) < 8 {
		t.Fatalf("streamed %d transactions, want the workload's 8", len(stream))
	}
	h.model = h.pgRows(pg)
	h.check("after backfill and stream")
	for i, b := range stream {
		if err := h.sink.Apply(ctx, b); err != nil {
			t.Fatalf("replaying stream batch %d: %v", i, err)
		}
	}
	h.check("after replaying the stream")
	if p, _ := h.position(); p != stream[len(stream)-1].Hi {
		t.Fatalf("position %v, want %v", p, stream[len(stream)-1].Hi)
	}
	t.Logf("%d keys equal after a backfill and %d streamed transactions", len(h.model), len(stream))
}

// applyChanges collapses and applies changes as one batch (snapshot chunks without a Hi) and
// returns it.
func (h *harness) applyChanges(phase batch.Phase, changes []batch.Change) sinks.Batch {
	h.t.Helper()
	col, err := batch.NewCollapser(h.spec.Schema)
	if err != nil {
		h.t.Fatal(err)
	}
	lo, hi := changes[0].Pos, changes[len(changes)-1].Pos
	collapsed, err := col.Collapse(changes)
	if err != nil {
		h.t.Fatal(err)
	}
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, h.spec.Schema)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rb.Release()
	rec, err := rb.Build(collapsed, time.Now())
	if err != nil {
		h.t.Fatalf("building the record: %v", err)
	}
	h.t.Cleanup(rec.Release)
	b := sinks.Batch{Spec: h.spec, Phase: phase, Record: rec}
	if phase == batch.PhaseStream {
		b.Lo = batch.SourcePosition{Source: testSourceOf(h), Position: lo}
		b.Hi = batch.SourcePosition{Source: testSourceOf(h), Position: hi}
	}
	if err := h.sink.Apply(h.t.Context(), b); err != nil {
		h.t.Fatalf("Apply %s batch: %v", phase, err)
	}
	return b
}

// testSourceOf returns the source of the harness' committed position (set by the backfill).
func testSourceOf(h *harness) batch.SourceID {
	p, ok := h.position()
	if !ok {
		h.t.Fatal("no committed position to take the source from")
	}
	return p.Source
}

// pgRows reads shop.orders from Postgres as the model.
func (h *harness) pgRows(pg *pgx.Conn) map[int64]row {
	h.t.Helper()
	rows, err := pg.Query(h.t.Context(), "SELECT id, coalesce(name, ''), coalesce(qty, 0), coalesce(price::text, '') FROM shop.orders")
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]row{}
	for rows.Next() {
		var (
			id int64
			r  row
		)
		if err := rows.Scan(&id, &r.Name, &r.Qty, &r.Price); err != nil {
			h.t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		h.t.Fatal(err)
	}
	return out
}
