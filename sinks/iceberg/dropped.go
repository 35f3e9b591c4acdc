package iceberg

import (
	"context"
	"slices"

	"github.com/apache/iceberg-go/table"
)

// droppedByHand returns the names of the columns of add that an earlier schema of tbl had:
// Sluice never drops a column, so one that was there and is gone was dropped (or renamed) by
// someone else. Re-adding it would leave it NULL in every row written before without a word;
// evolve leaves such a column out while the table holds rows (Apply then stops the table naming
// it, sinks.ColumnDroppedByHand) and re-adds it to an emptied table, which the backfill fills.
func droppedByHand(tbl *table.Table, add []outCol) []string {
	var out []string
	for _, c := range add {
		for _, sc := range tbl.Metadata().Schemas() {
			if _, ok := sc.FindFieldByName(c.name); ok {
				out = append(out, c.name)
				break
			}
		}
	}
	return out
}

// keepDropped removes from add the columns dropped by hand (droppedByHand) when tbl holds a
// committed position: the rows it holds had values there. A table without a position (new, or
// emptied for a backfill) gets them back.
func (s *Sink) keepDropped(ctx context.Context, tbl *table.Table, l layout, target string, add []outCol) ([]outCol, error) {
	gone := droppedByHand(tbl, add)
	if len(gone) == 0 {
		return add, nil
	}
	if _, has, err := tablePosition(tbl); err != nil || !has {
		return add, err
	}
	s.log.WarnContext(ctx, "columns dropped from the target outside Sluice are not added back while it holds rows; "+
		"the table stops at its next batch", "table", l.table, "target", target, "columns", gone)
	return slices.DeleteFunc(add, func(c outCol) bool { return slices.Contains(gone, c.name) }), nil
}
