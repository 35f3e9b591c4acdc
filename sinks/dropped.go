package sinks

// ColumnDroppedByHand is the poison error of a batch carrying column col of source table tbl
// that target lacks although the sink created it: someone dropped or renamed it in the sink
// (a sink adds every column the source adds and never drops one), so the rows the target
// holds lost its values. A sink never adds it back silently; the operator picks the remedy.
func ColumnDroppedByHand(tbl, target, col string) error {
	return Poisonf("table %s: target %s has no column %s, which the source sends: it was dropped or renamed in "+
		"the target outside Sluice, and the rows the target holds lost its values. Resync the table to copy them "+
		"again (sluice resync --table %s), or, to keep NULL in it for every row written before, add the column "+
		"back to the target yourself with its type and resume the table (sluice resume --table %s)",
		tbl, target, col, tbl, tbl)
}
