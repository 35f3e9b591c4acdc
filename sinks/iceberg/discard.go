package iceberg

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// liveFiles lists the data files and the delete files of tbl's current snapshot.
func liveFiles(ctx context.Context, tbl *table.Table) (data, deletes []iceberg.DataFile, err error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, nil, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the table's file system: %w", err)
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the manifest list: %w", err)
	}
	for _, m := range manifests {
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			return nil, nil, fmt.Errorf("reading manifest %s: %w", m.FilePath(), err)
		}
		for _, e := range entries {
			if df := e.DataFile(); df.ContentType() == iceberg.EntryContentData {
				data = append(data, df)
			} else {
				deletes = append(deletes, df)
			}
		}
	}
	return data, deletes, nil
}

// DiscardSnapshot empties the target table and removes its position, in one commit that removes
// every live data file and every delete file whole (no copy-on-write rewrite, which could bring
// deleted rows back, and no window in which the table is missing as with drop and recreate). The
// commit's summary carries a marker that stops Position's walk back, so earlier snapshots' positions
// are not read again. The table keeps its identity, schema and history. Idempotent.
func (s *Sink) DiscardSnapshot(ctx context.Context, spec sinks.TableSpec) error {
	ident, err := identifier(spec.Target)
	if err != nil {
		return err
	}
	tbl, err := s.cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading iceberg table %s: %w", spec.Target, err)
	}
	data, deletes, err := liveFiles(ctx, tbl)
	if err != nil {
		return fmt.Errorf("listing the files of iceberg table %s: %w", spec.Target, err)
	}
	_, hasPos, err := tablePosition(tbl)
	if err != nil {
		return err
	}
	if len(data) == 0 && len(deletes) == 0 && !hasPos {
		return nil
	}
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return fmt.Errorf("pinning the branch head of %s: %w", spec.Target, err)
	}
	summary := iceberg.Properties{positionKey: noPosition}
	if len(data) == 0 && len(deletes) == 0 {
		err = tx.AddFiles(ctx, nil, summary, false)
	} else {
		err = tx.ReplaceFiles(ctx, data, nil, deletes, summary)
	}
	if err == nil {
		err = tx.RemoveProperties([]string{positionKey})
	}
	if err != nil {
		return fmt.Errorf("staging the discard of iceberg table %s: %w", spec.Target, err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing the discard of iceberg table %s: %w", spec.Target, err)
	}
	s.log.InfoContext(ctx, "discarded partial snapshot", logkey.Table, tableName(spec), logkey.Target, spec.Target,
		logkey.DataFiles, len(data), logkey.DeleteFiles, len(deletes))
	return nil
}
