package reader

import (
	"context"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

// TestSignalIsSentWhenFull checks that a table's coalesced signal never carries more than
// MaxSignalRefs refs (the workflows' payload budget counts on it) and keeps their order.
func TestSignalIsSentWhenFull(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var got [][]staging.BatchRef
	r := &run{now: func() time.Time { return t0 }, deps: Deps{Tables: &fakeTables{
		signal: func(_ context.Context, _ batch.Schema, refs []staging.BatchRef) error {
			got = append(got, refs)
			return nil
		}}}}
	tb := &table{schema: testSchema("orders"), signalled: t0} // signalled just now: the next ones wait
	for i := range 2*MaxSignalRefs + 1 {
		ref := staging.BatchRef{Lo: batch.SourcePosition{Position: pos(uint64(i))}}
		if err := r.queueSignal(context.Background(), tb, ref); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || len(got[0]) != MaxSignalRefs || len(got[1]) != MaxSignalRefs || len(tb.unsignalled) != 1 {
		t.Fatalf("%d signals (sizes %d), %d refs pending; want two full signals of %d and one pending",
			len(got), sizes(got), len(tb.unsignalled), MaxSignalRefs)
	}
	for i, refs := range got {
		for j, ref := range refs {
			if want := uint64(i*MaxSignalRefs + j); ref.Lo.Position.LSN != want {
				t.Fatalf("signal %d ref %d is batch %d, want %d", i, j, ref.Lo.Position.LSN, want)
			}
		}
	}
}

func sizes(s [][]staging.BatchRef) []int {
	n := make([]int, len(s))
	for i := range s {
		n[i] = len(s[i])
	}
	return n
}
