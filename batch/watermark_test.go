package batch

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestCovered is the watermark rule's table: every edge of "skip a covered batch, trim a partly
// covered one", for the commit path and the sinks' guards alike.
func TestCovered(t *testing.T) {
	t.Parallel()
	src := SourceID{SystemID: "7301", Timeline: 1, Slot: "sluice_p1"}
	other := SourceID{SystemID: "7301", Timeline: 2, Slot: "sluice_p1"}
	at := func(lsn uint64, seq uint32) SourcePosition {
		return SourcePosition{Source: src, Position: Position{LSN: lsn, Seq: seq}}
	}
	var zero SourcePosition
	tests := []struct {
		name      string
		committed SourcePosition
		ok        bool
		phase     Phase
		lo, hi    SourcePosition
		want      Cover
		wantErr   bool
	}{
		{name: "no committed position", phase: PhaseStream, lo: at(10, 0), hi: at(20, 3), want: CoverNone},
		{name: "no committed position ignores the stale value", committed: at(50, 0), phase: PhaseStream, lo: at(10, 0), hi: at(20, 3), want: CoverNone},
		{name: "snapshot chunk with zero hi, no position", phase: PhaseSnapshot, want: CoverNone},
		{name: "snapshot chunk with zero hi under a position", committed: at(50, 0), ok: true, phase: PhaseSnapshot, want: CoverNone},
		{name: "end of snapshot: empty batch with hi, no position", phase: PhaseSnapshot, lo: at(50, 0), hi: at(50, 0), want: CoverNone},
		{name: "end of snapshot replayed at its own position", committed: at(50, 0), ok: true, phase: PhaseSnapshot, lo: at(50, 0), hi: at(50, 0), want: CoverNone},
		{name: "end of snapshot replayed after streaming began", committed: at(90, 1), ok: true, phase: PhaseSnapshot, lo: at(50, 0), hi: at(50, 0), want: CoverAll},
		{name: "equal positions", committed: at(20, 3), ok: true, phase: PhaseStream, lo: at(10, 0), hi: at(20, 3), want: CoverAll},
		{name: "one-row batch at the position", committed: at(20, 3), ok: true, phase: PhaseStream, lo: at(20, 3), hi: at(20, 3), want: CoverAll},
		{name: "hi below the position", committed: at(30, 0), ok: true, phase: PhaseStream, lo: at(10, 0), hi: at(20, 3), want: CoverAll},
		{name: "hi below by sequence only", committed: at(20, 4), ok: true, phase: PhaseStream, lo: at(20, 0), hi: at(20, 3), want: CoverAll},
		{name: "partial cover", committed: at(15, 2), ok: true, phase: PhaseStream, lo: at(10, 0), hi: at(20, 3), want: CoverPart},
		{name: "partial cover by sequence in one transaction", committed: at(20, 1), ok: true, phase: PhaseStream, lo: at(20, 0), hi: at(20, 3), want: CoverPart},
		{name: "lo at the position", committed: at(10, 0), ok: true, phase: PhaseStream, lo: at(10, 0), hi: at(20, 3), want: CoverPart},
		{name: "partial cover of a snapshot-phase batch", committed: at(15, 0), ok: true, phase: PhaseSnapshot, lo: at(10, 0), hi: at(20, 0), want: CoverPart},
		{name: "lo above the position", committed: at(10, 0), ok: true, phase: PhaseStream, lo: at(10, 1), hi: at(20, 3), want: CoverNone},
		{name: "lo far above the position", committed: at(5, 0), ok: true, phase: PhaseStream, lo: at(10, 0), hi: at(20, 3), want: CoverNone},
		{name: "hi of another source", committed: at(15, 0), ok: true, phase: PhaseStream, lo: at(10, 0),
			hi: SourcePosition{Source: other, Position: Position{LSN: 20}}, wantErr: true},
		{name: "hi of another source that would be covered", committed: at(50, 0), ok: true, phase: PhaseStream,
			lo: SourcePosition{Source: other, Position: Position{LSN: 10}}, hi: SourcePosition{Source: other, Position: Position{LSN: 20}}, wantErr: true},
		{name: "lo of another source than hi and the position", committed: at(15, 0), ok: true, phase: PhaseStream,
			lo: SourcePosition{Source: other, Position: Position{LSN: 10}}, hi: at(20, 0), wantErr: true},
		{name: "zero lo with a hi after the position", committed: at(15, 0), ok: true, phase: PhaseStream, lo: zero, hi: at(20, 0), want: CoverPart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Covered(tt.committed, tt.ok, tt.phase, tt.lo, tt.hi)
			if tt.wantErr {
				if !errors.Is(err, ErrDifferentSource) {
					t.Fatalf("Covered = %s, %v; want an error wrapping ErrDifferentSource", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Covered(committed %s ok %v, %s [%s..%s]) = %s, %v; want %s",
					tt.committed, tt.ok, tt.phase, tt.lo, tt.hi, got, err, tt.want)
			}
		})
	}
}

// TestDropCovered: the trimming of a partly covered batch keeps the rows after the committed
// position, in record order, and counts the rest.
func TestDropCovered(t *testing.T) {
	t.Parallel()
	schema := Schema{Table: testTable, Columns: []Column{
		{Name: "id", TypeOID: 20, TypeName: "bigint", Key: true, NotNull: true},
		{Name: "note", TypeOID: 25, TypeName: "text"},
	}}
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
		{"empty record", nil, 30, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			rb, err := NewRecordBuilder(mem, schema)
			if err != nil {
				t.Fatal(err)
			}
			var rows []Change
			for _, l := range tt.rows {
				rows = append(rows, Change{Op: OpUpdate, Pos: Position{LSN: l},
					Values: []Value{{Text: []byte(fmt.Sprint(l))}, {Null: true}}})
			}
			rec, err := rb.Build(rows, time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			out, dropped, err := DropCovered(mem, rec, Position{LSN: tt.committed})
			if err != nil {
				t.Fatal(err)
			}
			pos, err := RowPositions(out)
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
