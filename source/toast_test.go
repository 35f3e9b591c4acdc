package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

// TestToastUnchangedNeverLost updates rows without touching a large TOASTed column and checks
// that the value arrives (from the old tuple under REPLICA IDENTITY FULL) or is filled (by
// Fetcher from the source, or by an earlier image in the batch) and is never NULL.
func TestToastUnchangedNeverLost(t *testing.T) {
	t.Parallel()
	raw := make([]byte, 150_000) // incompressible: stored out of line
	_, _ = rand.Read(raw)
	big := hex.EncodeToString(raw)
	db := newTestDB(t,
		"CREATE TABLE doc (id int PRIMARY KEY, body text, n int)",
		"CREATE TABLE docf (id int PRIMARY KEY, body text, n int)",
		"ALTER TABLE docf REPLICA IDENTITY FULL")
	db.exec(t, "INSERT INTO doc VALUES (1, $1, 0), (2, $1, 0), (3, $1, 0)", big)
	db.exec(t, "INSERT INTO docf VALUES (1, $1, 0)", big)
	cfg := db.config(t, "doc", "docf")
	info := setup(t, cfg)
	db.exec(t, "UPDATE doc SET n = 1 WHERE id IN (1, 2, 3)")
	db.exec(t, "UPDATE docf SET n = 1 WHERE id = 1")
	db.exec(t, "DELETE FROM doc WHERE id = 3") // gone before the fetch: its update becomes a delete
	db.exec(t, "INSERT INTO doc VALUES (4, $1, 0)", big)
	db.exec(t, "UPDATE doc SET n = 2 WHERE id = 4") // earlier image of key 4 is in the batch
	evs := stream(t, cfg, info.Schemas, db.walLSN(t))

	t.Run("full identity takes the old tuple's value", func(t *testing.T) {
		changes := changesOf(evs, "public.docf")
		if len(changes) != 1 || changes[0].Op != batch.OpUpdate {
			t.Fatalf("want one update, got %d changes", len(changes))
		}
		if v := changes[0].Values[1]; v.Null || v.Unchanged || string(v.Text) != big {
			t.Fatalf("body: null=%v unchanged=%v len=%d, want the %d-byte value", v.Null, v.Unchanged, len(v.Text), len(big))
		}
	})

	t.Run("default identity marks it unchanged, collapse and fetch fill it", func(t *testing.T) {
		changes := changesOf(evs, "public.doc")
		if len(changes) != 6 {
			t.Fatalf("want 6 changes, got %d", len(changes))
		}
		for i := 0; i < 3; i++ {
			if v := changes[i].Values[1]; !v.Unchanged || v.Null {
				t.Fatalf("update %d: body must be marked unchanged, got null=%v len=%d", i, v.Null, len(v.Text))
			}
		}
		f, err := OpenFetcher(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close(context.Background())
		// An update whose row is gone by the time of the fetch (its delete is still ahead in
		// the stream) becomes a delete of its key, never a row with a NULL body.
		gone, err := f.Fill(context.Background(), info.Schemas[0], changes[2:3])
		if err != nil {
			t.Fatal(err)
		}
		if len(gone) != 1 || gone[0].Op != batch.OpDelete || string(gone[0].Values[0].Text) != "3" || gone[0].Pos != changes[2].Pos {
			t.Errorf("update of a vanished row: got %+v, want a delete of key 3 at %s", gone, changes[2].Pos)
		}
		// The batch pipeline: collapse (fills from earlier images), then the fetcher.
		col, err := batch.NewCollapser(info.Schemas[0])
		if err != nil {
			t.Fatal(err)
		}
		collapsed, err := col.Collapse(changes)
		if err != nil {
			t.Fatal(err)
		}
		filled, err := f.Fill(context.Background(), info.Schemas[0], collapsed)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]batch.Change{}
		for _, c := range filled {
			if NeedsFill(c) {
				t.Errorf("key %s still holds unchanged values", c.Values[0].Text)
			}
			got[string(c.Values[0].Text)] = c
		}
		for _, id := range []string{"1", "2", "4"} {
			c := got[id]
			if c.Op == batch.OpDelete || string(c.Values[1].Text) != big {
				t.Errorf("key %s: op %s body len %d, want the %d-byte value", id, c.Op, len(c.Values[1].Text), len(big))
			}
		}
		if c := got["3"]; c.Op != batch.OpDelete {
			t.Errorf("key 3: op %s, want delete", c.Op)
		}
	})
}
