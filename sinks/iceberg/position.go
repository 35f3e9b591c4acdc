package iceberg

import (
	"encoding/json"
	"fmt"

	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// Keys the sink writes into snapshot summaries and table properties.
const (
	// positionKey holds the committed batch.SourcePosition as JSON, or noPosition after a discard.
	positionKey = "sluice.position"
	// phaseKey records the phase of the batch that committed the position (snapshot or stream).
	phaseKey = "sluice.phase"
	// noPosition marks a snapshot after which the table holds no committed position (a discarded
	// snapshot); the walk back stops there.
	noPosition = "none"
)

// encodePosition is the stored form of a position.
func encodePosition(p batch.SourcePosition) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encoding position %s: %w", p, err)
	}
	return string(b), nil
}

// decodePosition parses the stored form; ok is false for the discard marker.
func decodePosition(s string) (p batch.SourcePosition, ok bool, err error) {
	if s == noPosition {
		return batch.SourcePosition{}, false, nil
	}
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return batch.SourcePosition{}, false, fmt.Errorf("parsing stored position %q: %w", s, err)
	}
	return p, true, nil
}

// tablePosition reads the committed position of tbl: the summary of the newest snapshot of the
// current branch that carries one, walking back past snapshots that do not (compaction, manifest
// rewrites, other writers). When the walk runs out of snapshots before finding one (expiry removed
// the ancestors, or the table has no snapshot), the table property written in the same commits is
// used. The summary wins over the property because it travels with the data: after a rollback the
// property may be ahead of the rows actually visible.
func tablePosition(tbl *table.Table) (pos batch.SourcePosition, ok bool, err error) {
	meta := tbl.Metadata()
	for snap := tbl.CurrentSnapshot(); snap != nil; {
		if snap.Summary != nil {
			if s, found := snap.Summary.Properties[positionKey]; found {
				return decodeStored(s, tbl, "snapshot summary")
			}
		}
		if snap.ParentSnapshotID == nil {
			break
		}
		snap = meta.SnapshotByID(*snap.ParentSnapshotID)
	}
	if s, found := tbl.Properties()[positionKey]; found {
		return decodeStored(s, tbl, "table property")
	}
	return batch.SourcePosition{}, false, nil
}

func decodeStored(s string, tbl *table.Table, where string) (batch.SourcePosition, bool, error) {
	p, ok, err := decodePosition(s)
	if err != nil {
		return batch.SourcePosition{}, false, sinks.Poisonf("Iceberg table %v: %s %s: %w; the table was "+
			"written by something else: fix or remove the %s property, or recreate the table and resync",
			tbl.Identifier(), where, positionKey, err, positionKey)
	}
	return p, ok, nil
}

// positionDepth is how many snapshots, counting the current one, lead back to the newest snapshot
// that carries a position (or a discard marker); 0 when none does. Expiry keeps at least that many
// so the position stays readable from a summary.
func positionDepth(tbl *table.Table) int {
	meta := tbl.Metadata()
	depth := 0
	for snap := tbl.CurrentSnapshot(); snap != nil; {
		depth++
		if snap.Summary != nil {
			if _, found := snap.Summary.Properties[positionKey]; found {
				return depth
			}
		}
		if snap.ParentSnapshotID == nil {
			break
		}
		snap = meta.SnapshotByID(*snap.ParentSnapshotID)
	}
	return 0
}
