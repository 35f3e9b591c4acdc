package reader

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// TestTableNotInTheConfigHoldsTheSlot: a table of the publication that the run does not read
// (removed from the config) never stops the reader: while it is still in the publication its
// changes are not staged and the slot is held at the first of them, whatever the other tables
// commit; once `sluice remove` dropped it from the publication its changes are skipped.
func TestTableNotInTheConfigHoldsTheSlot(t *testing.T) {
	t.Parallel()
	gone := tableName("gone")
	tests := []struct {
		name        string
		published   func(context.Context, batch.TableName) (bool, error)
		wantSafe    want
		wantHeld    []HeldTable
		wantErr     string
		wantChecked int
	}{
		{
			name:        "still in the publication: held at its first change",
			published:   func(context.Context, batch.TableName) (bool, error) { return true, nil },
			wantSafe:    heldAt(11),
			wantHeld:    []HeldTable{{Table: gone, Position: pos(11), Since: time.Unix(1_700_000_000, 0)}},
			wantChecked: 1,
		},
		{
			name:        "no publication check: held",
			wantSafe:    heldAt(11),
			wantHeld:    []HeldTable{{Table: gone, Position: pos(11), Since: time.Unix(1_700_000_000, 0)}},
			wantChecked: 0,
		},
		{
			name:        "dropped from the publication (sluice remove): skipped, nothing held",
			published:   func(context.Context, batch.TableName) (bool, error) { return false, nil },
			wantSafe:    nothingHeld,
			wantChecked: 1,
		},
		{
			name:        "the check fails: the reader retries",
			published:   func(context.Context, batch.TableName) (bool, error) { return false, errors.New("connection refused") },
			wantSafe:    nothingHeld,
			wantErr:     "table public.gone streams at 0/B:0 but is not in the pipeline's config: checking whether it is still in the publication: connection refused",
			wantChecked: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := newFakeStore()
			var mu sync.Mutex
			var signalled []string
			tables := &fakeTables{
				signal: func(_ context.Context, schema batch.Schema, refs []staging.BatchRef) error {
					mu.Lock()
					defer mu.Unlock()
					for _, r := range refs {
						signalled = append(signalled, schema.Table.Name+" "+r.Range())
					}
					return nil
				},
				resync: func(context.Context, batch.Schema) error { return errors.New("no resync expected") },
			}
			checked := 0
			var published func(context.Context, batch.TableName) (bool, error)
			if tt.published != nil {
				published = func(ctx context.Context, table batch.TableName) (bool, error) {
					checked++
					if table != gone {
						t.Errorf("publication checked for %s, want %s", table, gone)
					}
					return tt.published(ctx, table)
				}
			}
			var opts source.StreamOptions
			var safeAtEnd want
			steps := []source.Event{
				insert("orders", 10),
				&source.SchemaEvent{Table: gone, Pos: pos(11), New: testSchema("gone")},
				insert("gone", 11),
				insert("orders", 12),
				insert("gone", 13),
				&source.SchemaEvent{Table: gone, Pos: pos(14), Old: ptr(testSchema("gone")), New: testSchema("gone", "tag"), Added: []string{"tag"}},
				change("gone", 14, 3),
				&source.ProgressEvent{CaughtUp: true},
			}
			stream := &fakeStream{confirmed: 7, run: func(ctx context.Context, h source.Handler) error {
				for _, ev := range steps {
					if err := h(ctx, ev); err != nil {
						return err
					}
				}
				// Every staged batch committed and acknowledged: only the unlisted table holds.
				for _, r := range store.contents() {
					store.ack(r.URI)
				}
				opts.BeforeLastStatus(ctx)
				low, found := opts.Safe()
				safeAtEnd = want{lsn: low.LSN, none: !found}
				<-ctx.Done()
				return ctx.Err()
			}}
			clock := &stepClock{t: time.Unix(1_800_000_000, 0)}
			res, err := Read(ctx, Config{Pipeline: "p", Source: testSource, Schemas: []batch.Schema{testSchema("orders")},
				Limits: batch.Limits{MaxWait: time.Hour}, RunFor: 50 * time.Millisecond, ListEvery: time.Hour}, Deps{
				Store:       store,
				Tables:      tables,
				Published:   published,
				OpenFetcher: func(context.Context) (Fetcher, error) { return &fakeFetcher{}, nil },
				NewStream: func(o source.StreamOptions) (Stream, error) {
					opts = o
					return stream, nil
				},
				Now: clock.now,
			})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Read: %v", err)
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Read returned %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if safeAtEnd != tt.wantSafe {
				t.Errorf("with every staged batch acknowledged: %s, want %s", safeAtEnd, tt.wantSafe)
			}
			if checked != tt.wantChecked {
				t.Errorf("the publication was checked %d times, want %d (once per run and table)", checked, tt.wantChecked)
			}
			if len(res.Held) != len(tt.wantHeld) {
				t.Fatalf("held %+v, want %+v", res.Held, tt.wantHeld)
			}
			for i := range res.Held {
				if g, w := res.Held[i], tt.wantHeld[i]; g.Table != w.Table || g.Position != w.Position || !g.Since.Equal(w.Since) {
					t.Errorf("held %+v, want %+v", g, w)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(signalled, ",") != "orders 0/A:0..0/C:0" || res.Rows != 2 {
				t.Errorf("signalled %v (%d rows), want only orders' two changes", signalled, res.Rows)
			}
		})
	}
}
