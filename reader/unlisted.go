package reader

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/source"
)

// HeldTable is a table of the publication that a run does not read (the workers' config no
// longer lists it, or this run started before it was added) and whose changes it met: the run
// stages none of them and holds the slot at the first, so the next run after the table is added
// back reads them again, and `sluice remove` (which drops it from the publication) releases it.
type HeldTable struct {
	Table batch.TableName `json:"table"`
	// Position is the first of its changes the run met: the slot is confirmed no further.
	Position batch.Position `json:"position"`
	// Since is that change's commit time in the source (zero until its first row arrived).
	Since time.Time `json:"since,omitzero"`
}

// unlistedTable decides, at the first SchemaEvent of a table the run does not read, what its changes
// do for the rest of the run. A table still in the publication (removed from the config and not
// yet forgotten by `sluice remove`, or added to the config after this run started) holds the
// slot from e.Pos on: nothing of it is staged, and nothing after it is confirmed, so none of its
// changes is lost whatever the operator decides. A table no longer in the publication was
// forgotten: its changes (still decoded from WAL written while it was published) are skipped.
// The reader never stops for such a table; a renamed one is schemaChanged's.
func (r *run) unlistedTable(ctx context.Context, e *source.SchemaEvent) error {
	if _, decided := r.unlisted[e.Table]; decided {
		return nil
	}
	if r.unlisted == nil {
		r.unlisted = map[batch.TableName]bool{}
	}
	published := true
	if r.deps.Published != nil {
		var err error
		if published, err = r.deps.Published(ctx, e.Table); err != nil {
			return fmt.Errorf("table %s streams at %s but is not in the pipeline's config: checking whether it is still in the publication: %w",
				e.Table, e.Pos, err)
		}
	}
	r.unlisted[e.Table] = published
	if !published {
		r.log.Info("skipping changes of a table in neither the config nor the publication (forgotten by sluice remove)",
			logkey.Table, e.Table.String(), logkey.Position, e.Pos.String())
		return nil
	}
	r.held.setBuffered(e.Table, e.Pos, true) // never cleared in this run: the table is not read
	r.result.Held = append(r.result.Held, HeldTable{Table: e.Table, Position: e.Pos})
	r.log.Warn("a table in the publication but not in the config changes: its changes are not staged and the slot is held at the first; "+
		"add it back to tables[] and run `sluice start`, or forget it with `sluice remove --table`",
		"table", e.Table.String(), "pos", e.Pos.String())
	return nil
}

// unlistedChange records the commit time of the first change of a held table.
func (r *run) unlistedChange(e *source.ChangeEvent) {
	for i := range r.result.Held {
		if h := &r.result.Held[i]; h.Table == e.Table && h.Since.IsZero() {
			h.Since = e.Change.CommitTS
		}
	}
}
