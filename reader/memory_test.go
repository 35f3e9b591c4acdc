package reader

import (
	"bytes"
	"context"
	"runtime"
	"slices"
	"testing"
	"time"
	"weak"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// TestStagedBatchValuesAreNotKept checks that once a batch is staged, the reader keeps none of
// its decoded values (the cut's changes, the collapsed rows): the next batch is read with one
// batch of decoded values in memory, not two. Each step's changes are delivered, then, with the
// run still streaming, a garbage collection must free the values of every change staged.
func TestStagedBatchValuesAreNotKept(t *testing.T) {
	t.Parallel()
	insertAt := func(lsn, id uint64) *source.ChangeEvent {
		ev := change("orders", lsn, 2)
		ev.Change.Values[0].Text = []byte{byte('0' + id)}
		return ev
	}
	tests := []struct {
		name    string
		maxRows int
		changes [][2]uint64    // (lsn, key) of each insert
		then    []source.Event // delivered after the changes, to cut what is buffered
		advance time.Duration  // the clock moves this much before then
		batches int            // staged in the end
		copies  bool           // the fetcher returns new changes, as it does when it fills TOAST values
	}{
		{name: "cut by rows", maxRows: 2, changes: [][2]uint64{{10, 1}, {11, 2}}, batches: 1},
		{name: "two cuts by rows", maxRows: 2, changes: [][2]uint64{{10, 1}, {11, 2}, {12, 3}, {13, 4}}, batches: 2},
		{name: "collapsed within the batch", maxRows: 3, changes: [][2]uint64{{10, 1}, {11, 1}, {12, 2}}, batches: 1},
		{name: "cut by max_wait", maxRows: 100, changes: [][2]uint64{{10, 1}, {11, 2}},
			advance: 2 * time.Hour, then: []source.Event{&source.ProgressEvent{}}, batches: 1},
		{name: "filled by the fetcher", maxRows: 2, changes: [][2]uint64{{10, 1}, {11, 2}}, copies: true, batches: 1},
		{name: "flushed once caught up", maxRows: 100, changes: [][2]uint64{{10, 1}},
			then: []source.Event{&source.ProgressEvent{CaughtUp: true}}, batches: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
			store := newFakeStore()
			var staged int
			fetcher := &fakeFetcher{}
			if tt.copies {
				fetcher.fill = func(_ context.Context, _ batch.Schema, changes []batch.Change) ([]batch.Change, error) {
					return slices.Clone(changes), nil
				}
			}
			stream := &fakeStream{run: func(ctx context.Context, h source.Handler) error {
				values := make([]weak.Pointer[batch.Value], 0, len(tt.changes))
				for _, c := range tt.changes {
					ev := insertAt(c[0], c[1])
					values = append(values, weak.Make(&ev.Change.Values[0]))
					if err := h(ctx, ev); err != nil {
						return err
					}
				}
				clock.advance(tt.advance)
				for _, ev := range tt.then {
					if err := h(ctx, ev); err != nil {
						return err
					}
				}
				staged = len(store.puts)
				runtime.GC()
				for i, v := range values {
					if v.Value() != nil {
						t.Errorf("change %d (lsn %d): its values are still in memory after its batch was staged", i, tt.changes[i][0])
					}
				}
				cancel()
				return ctx.Err()
			}}
			cfg := Config{Pipeline: "p", Source: testSource, Schemas: []batch.Schema{testSchema("orders")},
				Limits: batch.Limits{MaxRows: tt.maxRows, MaxBytes: 1 << 20, MaxWait: time.Hour}, RunFor: time.Minute, ListEvery: time.Hour}
			_, _ = Read(ctx, cfg, Deps{
				Store:       store,
				Tables:      &fakeTables{signal: func(context.Context, batch.Schema, []staging.BatchRef) error { return nil }},
				OpenFetcher: func(context.Context) (Fetcher, error) { return fetcher, nil },
				NewStream:   func(source.StreamOptions) (Stream, error) { return stream, nil },
				Now:         clock.now,
			})
			if staged != tt.batches {
				t.Fatalf("%d batches staged, want %d", staged, tt.batches)
			}
		})
	}
}

// TestStagedFilesAreLZ4 checks the codec of the staged batch files: LZ4 unless the config asks
// for another (Arrow's zstd writer sets up an encoder of 16-24 MB for every file).
func TestStagedFilesAreLZ4(t *testing.T) {
	t.Parallel()
	lz4Frame, zstdFrame := []byte{0x04, 0x22, 0x4d, 0x18}, []byte{0x28, 0xb5, 0x2f, 0xfd}
	for _, tt := range []struct {
		name        string
		compression batch.Compression
		want, not   []byte
	}{
		{"the default", "", lz4Frame, zstdFrame},
		{"zstd when asked", batch.CompressionZstd, zstdFrame, lz4Frame},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			store := newFakeStore()
			stream := &fakeStream{run: func(ctx context.Context, h source.Handler) error {
				for lsn := uint64(10); lsn < 12; lsn++ {
					if err := h(ctx, insert("orders", lsn)); err != nil {
						return err
					}
				}
				cancel()
				return ctx.Err()
			}}
			cfg := Config{Pipeline: "p", Source: testSource, Schemas: []batch.Schema{testSchema("orders")}, Compression: tt.compression,
				Limits: batch.Limits{MaxRows: 2, MaxBytes: 1 << 20, MaxWait: time.Hour}, RunFor: time.Minute, ListEvery: time.Hour}
			_, _ = Read(ctx, cfg, Deps{
				Store:       store,
				Tables:      &fakeTables{signal: func(context.Context, batch.Schema, []staging.BatchRef) error { return nil }},
				OpenFetcher: func(context.Context) (Fetcher, error) { return &fakeFetcher{}, nil },
				NewStream:   func(source.StreamOptions) (Stream, error) { return stream, nil },
				Now:         (&stepClock{t: time.Unix(1_700_000_000, 0)}).now,
			})
			if len(store.data) != 1 {
				t.Fatalf("%d files staged, want 1", len(store.data))
			}
			file := store.data[0]
			if !bytes.Contains(file, tt.want) || bytes.Contains(file, tt.not) {
				t.Errorf("the staged file's buffers are not in the codec asked (%q): frames %x found %v, %x found %v",
					tt.compression, tt.want, bytes.Contains(file, tt.want), tt.not, bytes.Contains(file, tt.not))
			}
			rec, _, err := batch.ReadFile(bytes.NewReader(file), memory.DefaultAllocator)
			if err != nil {
				t.Fatalf("reading the staged file: %v", err)
			}
			defer rec.Release()
			if rec.NumRows() != 2 {
				t.Errorf("the staged file holds %d rows, want 2", rec.NumRows())
			}
		})
	}
}
