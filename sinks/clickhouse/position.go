package clickhouse

import (
	"context"
	"fmt"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// Position returns the committed position of the target table: the highest position among its
// marker rows (one per commit until merges fold them into one). ok is false when the table or
// its markers do not exist. Marker rows of two sources are poison: their order is undefined.
func (s *Sink) Position(ctx context.Context, spec sinks.TableSpec) (batch.SourcePosition, bool, error) {
	t, err := newTableRef(spec, s.cfg.Database)
	if err != nil {
		return batch.SourcePosition{}, false, err
	}
	return s.position(ctx, t)
}

// position reads the markers of target l; ok is false when the table does not exist. The filter reads only the one-byte marker column of data
// rows; without FINAL every unmerged marker is returned and the highest one wins, which is what
// FINAL would keep.
func (s *Sink) position(ctx context.Context, l tableRef) (batch.SourcePosition, bool, error) {
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s = 1", quote(ColPosition), l.qualified(), quote(ColMarker))
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		if c := exceptionCode(err); c == codeUnknownTable || c == codeUnknownDatabase {
			s.forget(l.db, l.name)
			return batch.SourcePosition{}, false, nil
		}
		return batch.SourcePosition{}, false, classify(err, "table %s: reading the committed position of %s.%s", l.source, l.db, l.name)
	}
	defer rows.Close()
	var best batch.SourcePosition
	found := false
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return batch.SourcePosition{}, false, classify(err, "table %s: reading the committed position of %s.%s", l.source, l.db, l.name)
		}
		p, err := batch.ParseSourcePosition(text)
		if err != nil {
			return batch.SourcePosition{}, false, sinks.Poisonf("table %s: %s.%s holds a position marker sluice cannot read "+
				"(%v); was the table written by something else? Drop the target and resync the table", l.source, l.db, l.name, err)
		}
		if !found {
			best, found = p, true
			continue
		}
		cmp, err := p.Compare(best)
		if err != nil {
			return batch.SourcePosition{}, false, sinks.Poisonf("table %s: %s.%s holds committed positions of two sources (%s and %s): "+
				"its rows came from different Postgres clusters, timelines or slots; resync the table (its target is "+
				"emptied and backfilled again)", l.source, l.db, l.name, best.Source, p.Source)
		}
		if cmp > 0 {
			best = p
		}
	}
	if err := rows.Err(); err != nil {
		return batch.SourcePosition{}, false, classify(err, "table %s: reading the committed position of %s.%s", l.source, l.db, l.name)
	}
	return best, found, nil
}
