package reader

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/source"
)

// unfollowable describes the column changes of e the sink cannot follow from the stream ("" when
// none): renames, whose existing rows keep their values under the new name without a word in the
// WAL, and type changes that are not widenings (source.Widens), which rewrote every row's value.
func unfollowable(e *source.SchemaEvent) string {
	var what []string
	for _, rn := range e.RenamedColumns {
		what = append(what, fmt.Sprintf("column %s was renamed to %s", rn.Old, rn.New))
	}
	if e.Old != nil {
		for _, name := range e.Retyped {
			i := slices.IndexFunc(e.Old.Columns, func(c batch.Column) bool { return c.Name == name })
			j := slices.IndexFunc(e.New.Columns, func(c batch.Column) bool { return c.Name == name })
			if i < 0 || j < 0 || source.Widens(e.Old.Columns[i], e.New.Columns[j]) {
				continue
			}
			what = append(what, fmt.Sprintf("column %s changed type from %s to %s", name, e.Old.Columns[i].TypeName, e.New.Columns[j].TypeName))
		}
	}
	return strings.Join(what, "; ")
}

// dropKeep is the tables[].on_drop_column value (config.DropColumnKeep) that follows a DROP
// COLUMN from the stream instead of resyncing.
const dropKeep = "keep"

// droppedResync says why table e.Table must resync after columns were dropped ("" when it need
// not): the sink keeps a dropped column, and every row not changed since would keep its last
// value there while the source has none. A new snapshot makes it NULL in every row, so the sink
// equals the source exactly. With tables[].on_drop_column keep the table follows the stream
// (and those rows keep their values).
func (r *run) droppedResync(e *source.SchemaEvent) string {
	if len(e.Dropped) == 0 {
		return ""
	}
	if r.cfg.OnDropColumn[e.Table] == dropKeep {
		r.log.Warn("columns dropped: following the stream (tables[].on_drop_column: keep); the sink keeps the columns, and rows not changed since keep their last values there",
			logkey.Table, e.Table.String(), logkey.Position, e.Pos.String(), logkey.Dropped, e.Dropped)
		return ""
	}
	r.log.Warn("columns dropped: resyncing the table from a new snapshot, so the sink's kept columns are NULL in every row (tables[].on_drop_column: keep follows the stream instead)",
		logkey.Table, e.Table.String(), logkey.Position, e.Pos.String(), logkey.Dropped, e.Dropped)
	return fmt.Sprintf("columns %v were dropped", e.Dropped)
}

// stopForSchema stops table t after a schema change the stream cannot carry (what, from
// unfollowable): its batches under the old schema are staged and signalled first, then its
// workflow fails with failure.SchemaChanged; the reader goes on for the other tables, and this
// table's later batches stay staged (holding the slot) until the operator resyncs it.
func (r *run) stopForSchema(ctx context.Context, t *table, e *source.SchemaEvent, what string) error {
	return r.stopTable(ctx, t, e, failure.SchemaChanged, what, fmt.Sprintf("table %s: %s at %s; Postgres changed the existing rows without writing them to the WAL, so the "+
		"sink cannot follow from the stream (it would keep the old values and leave the new ones NULL): the table is "+
		"stopped. Resync it from a new snapshot: sluice resync --table %s (the sink keeps the old column, NULL in every "+
		"row after the resync; drop it there if unwanted)", e.Table, what, e.Pos, e.Table))
}

// stopForIdentity stops table t when its replica identity no longer carries its key (e.Identity):
// a DELETE would arrive without the key it removes.
func (r *run) stopForIdentity(ctx context.Context, t *table, e *source.SchemaEvent) error {
	what := "the table's " + e.Identity
	return r.stopTable(ctx, t, e, failure.IdentityChanged, what, fmt.Sprintf("table %s: %s at %s: a DELETE (or a change of the key) would "+
		"arrive without the key it removes, so the sink could not apply it: the table is stopped. Set the replica "+
		"identity back (ALTER TABLE %s REPLICA IDENTITY DEFAULT, or FULL), then resume the table: sluice resume "+
		"--table %s (a DELETE made meanwhile stops the reader by name; then resync: sluice resync --table %s)",
		e.Table, what, e.Pos, e.Table, e.Table, e.Table))
}

// stopTable stops table t with an error of type errType and message msg after schema event e
// (what: the change, for the log).
func (r *run) stopTable(ctx context.Context, t *table, e *source.SchemaEvent, errType, what, msg string) error {
	r.log.Error("schema change the stream cannot carry: stopping the table", logkey.Table, e.Table.String(), logkey.Position, e.Pos.String(), logkey.Change, what)
	stopper, ok := r.deps.Tables.(TableStopper)
	if !ok {
		return failure.New(failure.SourceSetup, msg, nil)
	}
	if err := stopper.Stop(ctx, t.schema, errType, msg, ""); err != nil {
		return fmt.Errorf("stopping table %s after a schema change (%s): %w", e.Table, what, err)
	}
	return nil
}
