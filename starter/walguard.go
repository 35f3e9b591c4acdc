package main

import (
	"fmt"
	"io"

	"github.com/sluicecdc/sluice/source"
)

// printWALGuard reports, for `sluice check`, the WAL the pipeline's slot retains and how the
// server bounds it: a warning when max_slot_wal_keep_size is unlimited (the slot can fill the
// disk), the safe size left when it is limited (past it the slot is lost and every table must
// be resynced). See docs/operations.md.
func printWALGuard(w io.Writer, s source.SlotState) {
	if s.Exists {
		fmt.Fprintf(w, "slot %s retains %s of WAL (wal_status %s)\n", s.Slot, bytesText(s.RetainedBytes), s.WALStatus)
	} else {
		fmt.Fprintf(w, "slot %s does not exist yet (sluice start creates it)\n", s.Slot)
	}
	switch {
	case s.KeepUnlimited:
		fmt.Fprintln(w, "warning: max_slot_wal_keep_size is -1 (unlimited): a stopped or failed pipeline, or a paused table, makes the server keep WAL "+
			"until its disk is full; no change is ever lost, but the source can stop. Set a limit (ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; "+
			"SELECT pg_reload_conf()) to protect the disk, at the price of resyncing every table if the slot falls behind it (docs/operations.md)")
	case s.SafeWALSize != nil:
		fmt.Fprintf(w, "max_slot_wal_keep_size is %s: %s more WAL can be written before the slot is invalidated (then every table must be resynced)\n",
			s.MaxSlotWALKeepSize, bytesText(*s.SafeWALSize))
	default:
		fmt.Fprintf(w, "max_slot_wal_keep_size is %s\n", s.MaxSlotWALKeepSize)
	}
}
