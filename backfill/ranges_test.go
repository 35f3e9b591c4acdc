package backfill

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/source"
)

// readRange is the fake table's ReadRange: its read, bounded by r, from r's start when after is
// empty.
func (f *fakeTable) readRange(ctx context.Context, r source.KeyRange, after []string, limit int) (Chunk, error) {
	if len(after) == 0 && r.Lo != nil {
		after = []string{strconv.FormatInt(*r.Lo-1, 10)}
	}
	c, err := f.read(ctx, after, limit)
	if err != nil || r.Hi == nil {
		return c, err
	}
	// Cut the chunk at the range's end (the fake reads past it).
	n := 0
	for _, k := range c.Rec.Column(0).(interface{ Int64Values() []int64 }).Int64Values() {
		if k < *r.Hi {
			n++
		}
	}
	if n == c.Rows {
		return c, nil
	}
	cut := c.Rec.NewSlice(0, int64(n))
	c.Rec.Release()
	out := Chunk{Rec: cut, Rows: n}
	if n > 0 {
		out.Last = []string{strconv.FormatInt(cut.Column(0).(interface{ Int64Values() []int64 }).Int64Values()[n-1], 10)}
	}
	return out, nil
}

// fourRanges splits keys 1..n into [..,n/4), [n/4,n/2), [n/2,3n/4), [3n/4,..).
func fourRanges(n int64) []RangeCursor {
	b := func(v int64) *int64 { return &v }
	q := n / 4
	return []RangeCursor{{KeyRange: source.KeyRange{Hi: b(q)}}, {KeyRange: source.KeyRange{Lo: b(q), Hi: b(2 * q)}},
		{KeyRange: source.KeyRange{Lo: b(2 * q), Hi: b(3 * q)}}, {KeyRange: source.KeyRange{Lo: b(3 * q)}}}
}

// TestCopyRanges copies key ranges with several readers: every key is applied exactly once, in
// one call, across calls cut by RunFor, and across a failed read resumed from the returned
// cursor; the cursor ends done with every row counted.
func TestCopyRanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		lim      CopyLimits
		failRead int
		calls    int // at least this many calls to finish
	}{
		{name: "one call", lim: CopyLimits{ChunkRows: 7, ApplyBytes: 30 * 8, Parallel: 3}, calls: 1},
		{name: "calls cut by RunFor", lim: CopyLimits{ChunkRows: 7, ApplyBytes: 30 * 8, Parallel: 3, RunFor: 5 * time.Second}, calls: 3},
		{name: "a failed read resumes from the cursor", lim: CopyLimits{ChunkRows: 7, ApplyBytes: 30 * 8, Parallel: 2}, failRead: 9, calls: 2},
		{name: "chunks sized by bytes", lim: CopyLimits{ChunkRows: 50, ChunkBytes: 5 * 8, ApplyBytes: 30 * 8, Parallel: 4}, calls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeTable(203)
			f.failRead = tt.failRead
			deps := f.deps()
			deps.ReadRange = f.readRange
			deps.Read = nil
			at := Cursor{Ranges: fourRanges(203)}
			calls := 0
			for !at.Done {
				if calls++; calls > 100 {
					t.Fatal("the copy does not end")
				}
				next, err := Copy(context.Background(), tt.lim, deps, at)
				if err != nil && tt.failRead == 0 {
					t.Fatalf("call %d: %v", calls, err)
				}
				if next.Rows < at.Rows {
					t.Fatalf("call %d: the cursor went back from %d to %d rows", calls, at.Rows, next.Rows)
				}
				at = next
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			got := slices.Clone(f.applied)
			slices.Sort(got)
			if !slices.Equal(got, keys(1, 203)) {
				t.Errorf("applied %d keys %v, want 1..203 once each", len(got), got)
			}
			if at.Rows != 203 {
				t.Errorf("the cursor counts %d rows, want 203", at.Rows)
			}
			if calls < tt.calls {
				t.Errorf("finished in %d calls, want at least %d", calls, tt.calls)
			}
			for i, r := range at.Ranges {
				if !r.Done {
					t.Errorf("range %d is not done", i)
				}
			}
			if f.mem.CurrentAlloc() != 0 {
				t.Errorf("%d bytes of records not released", f.mem.CurrentAlloc())
			}
		})
	}
}
