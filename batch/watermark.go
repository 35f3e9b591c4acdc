package batch

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Cover is how much of a batch a table's committed position already holds, and so what
// committing the batch must do. Covered decides it; it is the one place of the watermark rule.
type Cover int

// The three answers of Covered.
const (
	// CoverNone: the target holds none of the batch's rows (it has no position, the batch is a
	// snapshot chunk, or the batch starts after the position): apply every row.
	CoverNone Cover = iota
	// CoverPart: the committed position falls inside the batch: drop the rows at or below it
	// (DropCovered) and apply the rest with the batch's Hi.
	CoverPart
	// CoverAll: the target holds the whole batch: skip it, the position stays.
	CoverAll
)

// String names the cover for logs and test failures.
func (c Cover) String() string {
	switch c {
	case CoverNone:
		return "none"
	case CoverPart:
		return "part"
	case CoverAll:
		return "all"
	}
	return fmt.Sprintf("Cover(%d)", int(c))
}

// Covered is the watermark rule: how much of a batch of phase with watermark [lo, hi] a target
// holds whose committed position is committed (ok false: the target holds none).
//
//   - A zero hi is a snapshot chunk: its rows carry no position to compare, and it moves no
//     position; CoverNone.
//   - Without a committed position nothing is covered; CoverNone.
//   - hi before the committed position, or equal to it, is CoverAll (skip the batch): a replay
//     never moves the position back. The exception is a snapshot-phase batch at exactly the
//     committed position: every snapshot row carries the snapshot's position, so an equal one
//     does not say the batch's rows are in; it is CoverNone (re-applying snapshot rows upserts).
//     An empty batch whose hi is the snapshot's end is such a batch.
//   - hi after the committed position and lo at or before it, or zero (unknown), is CoverPart:
//     the batch was cut across an earlier commit, so its rows at or below the position are
//     dropped (DropCovered).
//   - lo after the committed position is CoverNone.
//
// Positions of different sources have no order: comparing them is an error wrapping
// ErrDifferentSource, never a guess.
func Covered(committed SourcePosition, ok bool, phase Phase, lo, hi SourcePosition) (Cover, error) {
	if hi.Position.IsZero() || !ok {
		return CoverNone, nil
	}
	c, err := hi.Compare(committed)
	if err != nil {
		return CoverNone, fmt.Errorf("batch up to %s: %w", hi, err)
	}
	switch {
	case c < 0:
		return CoverAll, nil
	case c == 0 && phase == PhaseSnapshot:
		return CoverNone, nil
	case c == 0:
		return CoverAll, nil
	}
	if lo.Position.IsZero() {
		return CoverPart, nil
	}
	c, err = lo.Compare(committed)
	if err != nil {
		return CoverNone, fmt.Errorf("batch from %s: %w", lo, err)
	}
	if c > 0 {
		return CoverNone, nil
	}
	return CoverPart, nil
}

// DropCovered returns the rows of rec whose __pos is after committed, in their order, and how
// many rows it dropped: the trimming of a batch Covered calls CoverPart, whose rows at or below
// the committed position were written by an earlier commit. The caller releases the result and
// still owns rec.
func DropCovered(mem memory.Allocator, rec arrow.RecordBatch, committed Position) (arrow.RecordBatch, int64, error) {
	pos, err := RowPositions(rec)
	if err != nil {
		return nil, 0, err
	}
	// Rows are usually in position order, so the kept rows form few runs; slicing runs avoids
	// copying when nothing or everything is kept.
	var runs []arrow.RecordBatch
	defer func() {
		for _, r := range runs {
			r.Release()
		}
	}()
	var dropped int64
	start := -1
	for i := 0; i <= len(pos); i++ {
		keep := i < len(pos) && committed.Less(pos[i])
		switch {
		case keep && start < 0:
			start = i
		case !keep && start >= 0:
			runs = append(runs, rec.NewSlice(int64(start), int64(i)))
			start = -1
		}
		if i < len(pos) && !keep {
			dropped++
		}
	}
	if len(runs) == 0 {
		runs = append(runs, rec.NewSlice(0, 0))
	}
	out, err := concatRecords(mem, rec.Schema(), runs)
	if err != nil {
		return nil, 0, err
	}
	return out, dropped, nil
}

// concatRecords returns one record of schema holding the rows of recs in order (none: an empty
// record). The caller releases the result; recs are left to their owner. ConcatRecords is the
// checked form for records of other origins.
func concatRecords(mem memory.Allocator, schema *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		if len(parts) == 0 {
			b := array.NewBuilder(mem, schema.Field(i).Type)
			cols[i] = b.NewArray()
			b.Release()
			continue
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("concatenating column %s: %w", schema.Field(i).Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}
