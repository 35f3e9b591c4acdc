package reader

import (
	"context"

	"github.com/sluicecdc/sluice/source"
)

// relationSeen handles a RELATION message of a table the run knows (source.RelationEvent): the
// stream's cue that the table's catalog entry may have changed in ways the WAL cannot show. It
// runs on the stream's goroutine before the table's next change, so what it checks is checked
// before anything after the RELATION is staged (and so before the slot can be confirmed past
// it).
func (r *run) relationSeen(ctx context.Context, e *source.RelationEvent) error {
	return r.relationIdentity(ctx, e)
}
