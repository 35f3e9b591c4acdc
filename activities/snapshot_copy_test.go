package activities

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/backfill"
)

// TestCursorBeatRepeatsTheLastCursor checks that a copy blocked in a long read or write keeps
// heartbeating, and only with a cursor it reported (or the one it resumed from): the resumed
// attempt must never skip rows that were not applied.
func TestCursorBeatRepeatsTheLastCursor(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var beats []string
	send := func(_ context.Context, c backfill.Cursor) {
		mu.Lock()
		defer mu.Unlock()
		beats = append(beats, c.Last[0])
	}
	ctx := context.Background()
	b := startBeat(ctx, backfill.Cursor{Last: []string{"10"}}, 5*time.Millisecond, send)
	time.Sleep(40 * time.Millisecond) // a long first read: the resumed-from cursor repeats
	b.record(ctx, backfill.Cursor{Last: []string{"20"}, Rows: 10})
	time.Sleep(40 * time.Millisecond) // a long write
	b.stop()
	n := len(beats)
	time.Sleep(20 * time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	if len(beats) != n {
		t.Errorf("%d heartbeats after stop", len(beats)-n)
	}
	i := slices.Index(beats, "20")
	if i < 2 || len(beats)-i < 3 {
		t.Fatalf("heartbeats %q: want the resumed-from cursor 10 repeated, then 20 repeated", beats)
	}
	for j, got := range beats {
		want := "10"
		if j >= i {
			want = "20"
		}
		if got != want {
			t.Fatalf("heartbeat %d is %q, want %q (all: %q)", j, got, want, beats)
		}
	}
}
