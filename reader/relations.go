package reader

import (
	"context"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
)

// relationSeen handles a RELATION message of a table the run knows (source.RelationEvent): the
// stream's cue that the table's catalog entry may have changed in ways the WAL cannot show. It
// runs on the stream's goroutine before the table's next change, so what it checks is checked
// before anything after the RELATION is staged (and so before the slot can be confirmed past
// it).
func (r *run) relationSeen(ctx context.Context, e *source.RelationEvent) error {
	if err := r.relationIdentity(ctx, e); err != nil {
		return err
	}
	// A rewrite of the table's values (ALTER COLUMN ... TYPE) invalidates its relcache entry, so
	// pgoutput sends a RELATION before the table's next change: the watch compares its storage
	// with the record now.
	return r.checkCatalog(ctx, []batch.TableName{e.Table}, "at the table's RELATION at "+e.Pos.String())
}
