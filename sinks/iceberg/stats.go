package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go"
)

// FileStats counts the live files of a target's current snapshot: what decides whether
// maintenance is due, and what shows that deletes were written as equality deletes.
type FileStats struct {
	DataFiles           int
	EqualityDeleteFiles int
	PositionDeleteFiles int
}

// Files counts the live files of target's current snapshot.
func (s *Sink) Files(ctx context.Context, target string) (FileStats, error) {
	ident, err := identifier(target)
	if err != nil {
		return FileStats{}, err
	}
	tbl, err := s.cat.LoadTable(ctx, ident)
	if err != nil {
		return FileStats{}, fmt.Errorf("loading iceberg table %s: %w", target, err)
	}
	data, deletes, err := liveFiles(ctx, tbl)
	if err != nil {
		return FileStats{}, fmt.Errorf("listing files of %s: %w", target, err)
	}
	st := FileStats{DataFiles: len(data)}
	for _, f := range deletes {
		if f.ContentType() == iceberg.EntryContentEqDeletes {
			st.EqualityDeleteFiles++
		} else {
			st.PositionDeleteFiles++
		}
	}
	return st, nil
}
