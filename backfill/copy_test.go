package backfill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fakeTable is a snapshot of rows with keys 1..rows, read in key order, with a clock that each
// read advances by readTime. Its sink records every key applied and every heartbeat.
type fakeTable struct {
	rows     int64
	readTime time.Duration
	failRead int // the read (1-based) that fails; 0 never
	failAt   int // the write (1-based) that fails; 0 never

	mu         sync.Mutex
	now        time.Time
	reads      int
	writes     int
	applied    []int64 // keys, in write order (a key may repeat after a retry)
	heartbeats []Cursor
	mem        *memory.CheckedAllocator
}

func newFakeTable(rows int64) *fakeTable {
	return &fakeTable{rows: rows, readTime: time.Second, now: time.Unix(0, 0), mem: memory.NewCheckedAllocator(memory.NewGoAllocator())}
}

func (f *fakeTable) deps() CopyDeps {
	return CopyDeps{
		Read: f.read,
		Apply: func(_ context.Context, rec arrow.RecordBatch) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.writes++
			if f.writes == f.failAt {
				return errors.New("sink unavailable")
			}
			f.applied = append(f.applied, rec.Column(0).(*array.Int64).Int64Values()...)
			return nil
		},
		Heartbeat: func(_ context.Context, c Cursor) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.heartbeats = append(f.heartbeats, c)
		},
		Mem: f.mem,
		Now: func() time.Time {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.now
		},
	}
}

func (f *fakeTable) read(_ context.Context, after []string, limit int) (Chunk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	f.now = f.now.Add(f.readTime)
	if f.reads == f.failRead {
		return Chunk{}, errors.New("connection reset")
	}
	var from int64
	if len(after) == 1 {
		k, err := strconv.ParseInt(after[0], 10, 64)
		if err != nil {
			return Chunk{}, err
		}
		from = k
	}
	b := array.NewInt64Builder(f.mem)
	defer b.Release()
	last := from
	for k := from + 1; k <= f.rows && k <= from+int64(limit); k++ {
		b.Append(k)
		last = k
	}
	col := b.NewArray()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	c := Chunk{Rec: array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len())), Rows: col.Len()}
	if c.Rows > 0 {
		c.Last = []string{strconv.FormatInt(last, 10)}
	}
	return c, nil
}

// keys returns 1..n.
func keys(from, to int64) []int64 {
	var out []int64
	for k := from; k <= to; k++ {
		out = append(out, k)
	}
	return out
}

func TestCopy(t *testing.T) {
	t.Parallel()
	const rowBytes = 8 // one int64 column, no nulls
	tests := []struct {
		name       string
		rows       int64
		lim        CopyLimits
		from       Cursor
		failRead   int
		failWrite  int
		wantErr    bool
		want       Cursor
		wantKeys   []int64
		wantWrites int
	}{
		{name: "one chunk per write when a chunk fills the bytes", rows: 25,
			lim:  CopyLimits{ChunkRows: 10, ApplyBytes: 10 * rowBytes},
			want: Cursor{Last: []string{"25"}, Rows: 25, Chunks: 3, Done: true}, wantKeys: keys(1, 25), wantWrites: 3},
		{name: "chunks grouped into one write up to the bytes", rows: 95,
			lim:  CopyLimits{ChunkRows: 10, ApplyBytes: 40 * rowBytes},
			want: Cursor{Last: []string{"95"}, Rows: 95, Chunks: 10, Done: true}, wantKeys: keys(1, 95), wantWrites: 3},
		{name: "a last chunk without rows ends the copy", rows: 20,
			lim:  CopyLimits{ChunkRows: 10, ApplyBytes: 1 << 20},
			want: Cursor{Last: []string{"20"}, Rows: 20, Chunks: 3, Done: true}, wantKeys: keys(1, 20), wantWrites: 1},
		{name: "flushes every FlushEvery on a slow source", rows: 100,
			lim:  CopyLimits{ChunkRows: 10, ApplyBytes: 1 << 20, FlushEvery: 3 * time.Second},
			want: Cursor{Last: []string{"100"}, Rows: 100, Chunks: 11, Done: true}, wantKeys: keys(1, 100), wantWrites: 4},
		{name: "returns between writes after RunFor", rows: 1000,
			lim:  CopyLimits{ChunkRows: 10, ApplyBytes: 20 * rowBytes, RunFor: 5 * time.Second},
			want: Cursor{Last: []string{"60"}, Rows: 60, Chunks: 6}, wantKeys: keys(1, 60), wantWrites: 3},
		{name: "resumes after the heartbeat's cursor", rows: 50,
			lim:  CopyLimits{ChunkRows: 10, ApplyBytes: 10 * rowBytes},
			from: Cursor{Last: []string{"30"}, Rows: 30, Chunks: 3},
			want: Cursor{Last: []string{"50"}, Rows: 50, Chunks: 6, Done: true}, wantKeys: keys(31, 50), wantWrites: 2},
		{name: "a failed write returns the cursor before its chunks", rows: 50,
			lim: CopyLimits{ChunkRows: 10, ApplyBytes: 20 * rowBytes}, failWrite: 2, wantErr: true,
			want: Cursor{Last: []string{"20"}, Rows: 20, Chunks: 2}, wantKeys: keys(1, 20), wantWrites: 2},
		{name: "a failed read returns the cursor of the last write", rows: 50,
			lim: CopyLimits{ChunkRows: 10, ApplyBytes: 20 * rowBytes}, failRead: 4, wantErr: true,
			want: Cursor{Last: []string{"20"}, Rows: 20, Chunks: 2}, wantKeys: keys(1, 20), wantWrites: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeTable(tt.rows)
			f.failRead, f.failAt = tt.failRead, tt.failWrite
			got, err := Copy(context.Background(), tt.lim, f.deps(), tt.from)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Copy error %v, want error %v", err, tt.wantErr)
			}
			if !slices.Equal(got.Last, tt.want.Last) || got.Rows != tt.want.Rows || got.Chunks != tt.want.Chunks || got.Done != tt.want.Done {
				t.Fatalf("Copy returned cursor %+v, want %+v", got, tt.want)
			}
			if !slices.Equal(f.applied, tt.wantKeys) || f.writes != tt.wantWrites {
				t.Fatalf("sink got keys %v in %d writes, want %v in %d", f.applied, f.writes, tt.wantKeys, tt.wantWrites)
			}
			// A heartbeat never claims a row the sink has not got: its cursor is a written key.
			for _, hb := range f.heartbeats {
				if len(hb.Last) == 0 {
					continue
				}
				k, _ := strconv.ParseInt(hb.Last[0], 10, 64)
				if !slices.Equal(hb.Last, tt.from.Last) && !slices.Contains(f.applied, k) {
					t.Fatalf("heartbeat %+v claims key %d, which was never written (written: %v)", hb, k, f.applied)
				}
			}
			f.mem.AssertSize(t, 0)
		})
	}
}

// TestCopyRetryFromHeartbeatCopiesEveryRow is an attempt that fails mid-copy and a retried
// attempt that starts from the last heartbeat's cursor, as the CopySnapshot activity does: the
// sink ends with every key, none lost and only the failed write's rows written twice at most.
func TestCopyRetryFromHeartbeatCopiesEveryRow(t *testing.T) {
	t.Parallel()
	f := newFakeTable(1000)
	f.failAt = 7
	lim := CopyLimits{ChunkRows: 25, ApplyBytes: 50 * 8}
	if _, err := Copy(context.Background(), lim, f.deps(), Cursor{}); err == nil {
		t.Fatal("first attempt: want the sink's failure")
	}
	resume := f.heartbeats[len(f.heartbeats)-1]
	got, err := Copy(context.Background(), lim, f.deps(), resume)
	if err != nil {
		t.Fatalf("retried attempt: %v", err)
	}
	if !got.Done || got.Rows != 1000 {
		t.Fatalf("retried attempt ended at %+v, want done with 1000 rows counted", got)
	}
	seen := map[int64]int{}
	for _, k := range f.applied {
		seen[k]++
	}
	for k := int64(1); k <= 1000; k++ {
		if seen[k] != 1 {
			t.Fatalf("key %d written %d times, want once (resume at %v)", k, seen[k], resume.Last)
		}
	}
	if fmt.Sprint(resume.Last) != "[300]" {
		t.Fatalf("resumed from %v, want after key 300 (six writes of 50)", resume.Last)
	}
}

// TestCopyStopsAfterTheChunkItReads: closing Stop (a paused table) mid-group ends the copy
// after the chunk being read, with those chunks written and their cursor returned; a copy from
// that cursor writes the rest, every key once.
func TestCopyStopsAfterTheChunkItReads(t *testing.T) {
	t.Parallel()
	f := newFakeTable(1000)
	stop := make(chan struct{})
	deps := f.deps()
	read := deps.Read
	deps.Read = func(ctx context.Context, after []string, limit int) (Chunk, error) {
		c, err := read(ctx, after, limit)
		if f.reads == 3 {
			close(stop)
		}
		return c, err
	}
	deps.Stop = stop
	lim := CopyLimits{ChunkRows: 25, ApplyBytes: 1 << 30, FlushEvery: time.Hour}
	at, err := Copy(context.Background(), lim, deps, Cursor{})
	if err != nil || at.Done || at.Chunks != 3 || at.Rows != 75 || fmt.Sprint(at.Last) != "[75]" {
		t.Fatalf("stopped copy returned %+v, %v; want 3 chunks (75 rows) written, not done", at, err)
	}
	if f.writes != 1 || !slices.Equal(f.applied, keys(1, 75)) {
		t.Fatalf("stopped copy wrote %d times, keys %d..; want keys 1-75 in one write", f.writes, len(f.applied))
	}
	deps.Stop = nil
	rest, err := Copy(context.Background(), lim, deps, at)
	if err != nil || !rest.Done || rest.Rows != 1000 {
		t.Fatalf("resumed copy returned %+v, %v; want done with 1000 rows counted", rest, err)
	}
	if !slices.Equal(f.applied, keys(1, 1000)) {
		t.Fatalf("keys written %d, want 1..1000 once each in order", len(f.applied))
	}
}
