package backfill

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// chunkRows returns the id → note of a chunk's record ("<null>" for NULL).
func chunkRows(t *testing.T, rec arrow.RecordBatch) map[int64]string {
	t.Helper()
	ids, ok := rec.Column(0).(*array.Int64)
	if !ok {
		t.Fatalf("column id is %s", rec.Column(0).DataType())
	}
	notes := rec.Column(1).(*array.String)
	out := map[int64]string{}
	for i := 0; i < int(rec.NumRows()); i++ {
		note := "<null>"
		if notes.IsValid(i) {
			note = notes.Value(i)
		}
		out[ids.Value(i)] = note
	}
	return out
}

// TestReadAheadCopiesEveryRowOnce reads a table under a snapshot in chunks the way CopyChunk
// does, with the next chunk read ahead, and checks the rows key by key against the table as the
// snapshot sees it: a retried chunk (the same cursor again) and a read ahead that nobody takes
// change nothing, and rows written after the snapshot never appear.
func TestReadAheadCopiesEveryRowOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := testenv.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const total = 2500
	if _, err := conn.Exec(ctx, `CREATE TABLE public.items (id bigint PRIMARY KEY, note text);
		INSERT INTO public.items SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'note ' || g END FROM generate_series(1, 2500) g`); err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	for i := int64(1); i <= total; i++ {
		want[i] = fmt.Sprintf("note %d", i)
		if i%7 == 0 {
			want[i] = "<null>"
		}
	}
	table := batch.TableName{Schema: "public", Name: "items"}
	schema, err := source.DiscoverSchema(ctx, conn, source.TableConfig{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	cfg := source.Config{DSN: dsn, Slot: "sluice_items", Publication: "sluice_items",
		Tables: []source.TableConfig{{Table: table}}}

	tests := []struct {
		name string
		// retryAt re-asks the chunk at this index once after its read ahead has started; -1: never.
		retryAt int
		// abandonAt stops the read ahead started after this chunk and reads on without it; -1: never.
		abandonAt int
	}{
		{name: "every chunk read ahead", retryAt: -1, abandonAt: -1},
		{name: "a chunk retried after its read ahead started", retryAt: 2, abandonAt: -1},
		{name: "a read ahead abandoned", retryAt: -1, abandonAt: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			snap, err := source.OpenSnapshot(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Close(context.Background())
			// Written after the snapshot: never part of it. Deleted again for the next case.
			if _, err := conn.Exec(ctx, "INSERT INTO public.items VALUES ($1, 'late')", total+1); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if _, err := conn.Exec(context.Background(), "DELETE FROM public.items WHERE id > $1", total); err != nil {
					t.Error(err)
				}
			}()
			h := NewSession(table, snap)
			defer h.StopReadAhead()
			got := map[int64]string{}
			var after []string
			const limit = 400
			for i := 0; ; i++ {
				c, err := h.ReadChunk(ctx, mem, schema, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				rows := chunkRows(t, c.Rec)
				done := c.Rows < limit
				if !done {
					h.ReadAheadFrom(ctx, mem, schema, c.Last, limit)
				}
				if i == tt.retryAt {
					again, err := h.ReadChunk(ctx, mem, schema, after, limit)
					if err != nil {
						t.Fatal(err)
					}
					if reread := chunkRows(t, again.Rec); !maps.Equal(rows, reread) {
						diff := fmt.Sprintf("%v, the first read had %v", reread, rows)
						t.Fatalf("chunk %d read again differs: %s", i, diff)
					}
					again.Rec.Release()
				}
				if i == tt.abandonAt {
					// Stopping a read ahead in flight cancels its query, which closes the
					// snapshot's connection by design (the run then re-snapshots); reading on
					// after a stop is only possible once the read has ended, so wait for it.
					h.mu.Lock()
					ra := h.next
					h.mu.Unlock()
					if ra != nil {
						<-ra.done
					}
					h.StopReadAhead()
				}
				c.Rec.Release()
				for id, note := range rows {
					if _, dup := got[id]; dup {
						t.Fatalf("id %d copied twice (chunk %d)", id, i)
					}
					got[id] = note
				}
				if done {
					break
				}
				after = c.Last
			}
			if !maps.Equal(want, got) {
				diff := fmt.Sprintf("%d rows copied of %d; copied %v, want %v", len(got), len(want), got, want)
				t.Fatalf("rows copied differ from the snapshot's: %s", diff)
			}
		})
	}
}
