package activities

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

// readBatchFile decodes a staged batch file (batch.WriteFile's format) and checks that it holds
// the batch ref names. The caller releases the result.
func readBatchFile(mem memory.Allocator, data []byte, ref staging.BatchRef) (arrow.RecordBatch, batch.FileHeader, error) {
	rec, h, err := batch.ReadFile(bytes.NewReader(data), mem)
	if err != nil {
		return nil, h, err
	}
	if h.Table != ref.Table || h.Lo != ref.Lo || h.Hi != ref.Hi {
		rec.Release()
		return nil, h, fmt.Errorf("the file holds batch %s[%s..%s], not the one staged under its name", h.Table, h.Lo, h.Hi)
	}
	return rec, h, nil
}

// concatRecords returns one record holding the rows of recs in order. The caller releases the
// result; recs are left to their owner.
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

// dropCommitted returns the rows of rec whose __pos is after committed, and how many rows it
// dropped. A partly covered batch overlaps what the sink already holds; its rows at or below the
// committed position were committed by an earlier batch. The caller releases the result (and
// still owns rec).
func dropCommitted(mem memory.Allocator, rec arrow.RecordBatch, committed batch.Position) (arrow.RecordBatch, int64, error) {
	pos, err := batch.RowPositions(rec)
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
