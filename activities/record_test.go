package activities

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
)

func TestDropCommitted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		rows        []uint64 // row LSNs in record order (collapse can reorder them)
		committed   uint64
		wantKept    []uint64
		wantDropped int64
	}{
		{"none covered", []uint64{10, 20, 30}, 5, []uint64{10, 20, 30}, 0},
		{"prefix covered", []uint64{10, 20, 30}, 20, []uint64{30}, 2},
		{"all covered", []uint64{10, 20, 30}, 30, nil, 3},
		{"out of order rows keep their order", []uint64{40, 10, 50, 20, 60}, 30, []uint64{40, 50, 60}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			rb, err := batch.NewRecordBuilder(mem, testSpec.Schema)
			if err != nil {
				t.Fatal(err)
			}
			var rows []batch.Change
			for _, l := range tt.rows {
				rows = append(rows, batch.Change{Op: batch.OpUpdate, Pos: batch.Position{LSN: l},
					Values: []batch.Value{{Text: []byte(fmt.Sprint(l))}, {Null: true}}})
			}
			rec, err := rb.Build(rows, time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			out, dropped, err := dropCommitted(mem, rec, batch.Position{LSN: tt.committed})
			if err != nil {
				t.Fatal(err)
			}
			pos, err := batch.RowPositions(out)
			if err != nil {
				t.Fatal(err)
			}
			var kept []uint64
			for _, p := range pos {
				kept = append(kept, p.LSN)
			}
			if fmt.Sprint(kept) != fmt.Sprint(tt.wantKept) || dropped != tt.wantDropped {
				t.Errorf("kept %v dropped %d, want %v and %d", kept, dropped, tt.wantKept, tt.wantDropped)
			}
			if out.NumCols() != rec.NumCols() {
				t.Errorf("trimmed record has %d columns, want %d", out.NumCols(), rec.NumCols())
			}
			out.Release()
			rec.Release()
			rb.Release()
			mem.AssertSize(t, 0)
		})
	}
}
