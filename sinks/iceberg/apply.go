package iceberg

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// plan is what one batch does to its table.
type plan struct {
	upsert  []bool // rows written to the data file (every operation but delete)
	delKey  []bool // rows whose key goes to the equality delete file
	upserts int
	deletes int
}

// Apply commits b as one snapshot: an equality delete file with the key of every row that may
// replace or delete an existing row, a data file with the upserted rows, and b.Hi in the snapshot
// summary and the table properties. The commit requires the branch head Apply read, so a
// concurrent writer makes it fail (transiently) instead of interleaving. Its guard (see
// sinks.Sink) re-checks the position of the table it loaded with batch.Covered and skips a
// batch the table holds, so a replay that raced past the caller's check cannot move the position
// back. A batch with a zero Hi (a backfill chunk) writes its rows and leaves the position as it
// was; a batch without rows commits its Hi alone.
//
// Snapshot-phase rows (snapshot-read) are appended without deletes unless their keys may already
// be in the table. That is decided from the table itself, not from the caller's bookkeeping: are
// there live data files whose key column statistics overlap the batch's key range (keyIndex,
// which reads each manifest once)? Backfill chunks follow the primary key, so chunks after the
// first one normally find none and append; an earlier attempt of the same chunk, or live events
// already applied, make them overlap and the rows take the upsert path. Rows of any other
// operation always take it.
func (s *Sink) Apply(ctx context.Context, b sinks.Batch) error {
	ident, err := identifier(b.Spec.Target)
	if err != nil {
		return err
	}
	name := tableName(b.Spec)
	tbl, err := s.cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return sinks.Poisonf("table %s: iceberg table %s does not exist (dropped while the pipeline ran?); "+
			"resume the table so it is created again", name, b.Spec.Target)
	}
	if err != nil {
		return fmt.Errorf("loading iceberg table %s: %w", b.Spec.Target, err)
	}
	if done, err := s.guard(ctx, tbl, b); done || err != nil {
		return err
	}

	l, err := newLayout(b.Spec, b.Record.Schema())
	if err != nil {
		return err
	}
	if err := checkTableMatches(l, tbl.Schema(), b.Spec.Target); err != nil {
		return err
	}
	if err := checkKeysNotNull(b.Record, l); err != nil {
		return err
	}
	ops, err := readOps(b.Record, name)
	if err != nil {
		return err
	}
	p, err := s.plan(ctx, tbl, b, l, ops)
	if err != nil {
		return err
	}
	if err := s.commit(ctx, tbl, b, l, p); err != nil {
		return err
	}
	s.log.DebugContext(ctx, "committed batch", logkey.Table, name, logkey.Position, b.Hi.String(),
		logkey.Upserts, p.upserts, logkey.Deletes, p.deletes, logkey.Phase, string(b.Phase))
	return nil
}

// guard reports whether tbl, as loaded for this commit, already holds all of b (batch.Covered
// says CoverAll): the commit is pinned to that load's branch head, so the check and the write are
// one atomic step. Positions of another source are poison: their order is undefined and the
// table belongs to another stream.
func (s *Sink) guard(ctx context.Context, tbl *table.Table, b sinks.Batch) (bool, error) {
	committed, ok, err := tablePosition(tbl)
	if err != nil {
		return false, err
	}
	cover, err := batch.Covered(committed, ok, b.Phase, b.Lo, b.Hi)
	if err != nil {
		return false, sinks.Poisonf("table %s: iceberg table %s holds position %s of another source than "+
			"batch %s: %w; the table was replicated from another cluster or slot: discard it and resync",
			tableName(b.Spec), b.Spec.Target, committed, b.Hi, err)
	}
	if cover == batch.CoverAll {
		s.log.InfoContext(ctx, "batch already committed, skipping", logkey.Table, tableName(b.Spec),
			logkey.Position, b.Hi.String(), logkey.Committed, committed.String())
		return true, nil
	}
	return false, nil
}

// checkTableMatches makes sure every column of the batch exists in the table with the same type.
func checkTableMatches(l layout, sc *iceberg.Schema, target string) error {
	for _, c := range l.cols {
		f, ok := sc.FindFieldByName(c.name)
		if !ok {
			return sinks.ColumnDroppedByHand(l.table, target, c.name)
		}
		t, err := l.icebergType(c)
		if err != nil {
			return err
		}
		if t.String() != f.Type.String() {
			return sinks.Poisonf("table %s column %s: the batch carries %s but iceberg table %s has %s; "+
				"the sink does not change column types: alter the Iceberg column or recreate the table",
				l.table, c.name, t, target, f.Type)
		}
	}
	return nil
}

// plan decides which rows are written and which keys are deleted.
func (s *Sink) plan(ctx context.Context, tbl *table.Table, b sinks.Batch, l layout, ops []batch.Op) (plan, error) {
	n := len(ops)
	p := plan{upsert: make([]bool, n), delKey: make([]bool, n)}
	snapRows := make([]bool, n)
	anySnap := false
	for i, op := range ops {
		p.upsert[i] = op != batch.OpDelete
		if b.Phase == batch.PhaseSnapshot && op == batch.OpSnapshot {
			snapRows[i], anySnap = true, true
		} else {
			p.delKey[i] = true
		}
	}
	if anySnap {
		present, err := s.keys.keysMayExist(ctx, tbl, b.Record, snapRows, l.keyCols()[0])
		if err != nil {
			return plan{}, fmt.Errorf("table %s: checking whether snapshot keys are present: %w", l.table, err)
		}
		if present {
			for i := range snapRows {
				p.delKey[i] = p.delKey[i] || snapRows[i]
			}
		}
	}
	for i := range n {
		if p.upsert[i] {
			p.upserts++
		}
		if p.delKey[i] {
			p.deletes++
		}
	}
	return p, nil
}

// commit writes the files and commits them with the position in one transaction pinned to the
// branch head tbl was loaded at.
func (s *Sink) commit(ctx context.Context, tbl *table.Table, b sinks.Batch, l layout, p plan) error {
	// A snapshot chunk (zero Hi) writes rows and leaves the position as it was: its snapshot has
	// no position in its summary, which Position walks past, and the property stays.
	chunk := b.Hi.Position.IsZero()
	var pos string
	if !chunk {
		var err error
		if pos, err = encodePosition(b.Hi); err != nil {
			return err
		}
	}
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return fmt.Errorf("pinning the branch head of %s: %w", b.Spec.Target, err)
	}
	var written []iceberg.DataFile
	dataFiles, err := s.writeData(ctx, tbl, b, l, p)
	written = append(written, dataFiles...)
	if err != nil {
		s.removeFiles(ctx, tbl, written)
		return err
	}
	delFiles, err := s.writeDeletes(ctx, tx, tbl, b, l, p)
	written = append(written, delFiles...)
	if err != nil {
		s.removeFiles(ctx, tbl, written)
		return err
	}

	summary := iceberg.Properties{phaseKey: string(b.Phase)}
	if !chunk {
		summary[positionKey] = pos
	}
	if len(written) == 0 {
		// Nothing to write (an empty or fully trimmed batch): an empty append still moves the
		// branch head, so the position is in a summary like any other.
		err = tx.AddFiles(ctx, nil, summary, false)
	} else {
		err = tx.NewRowDelta(summary).AddRows(dataFiles...).AddDeletes(delFiles...).Commit(ctx)
	}
	if err == nil && !chunk {
		err = tx.SetProperties(iceberg.Properties{positionKey: pos})
	}
	if err != nil {
		s.removeFiles(ctx, tbl, written)
		return classifyCommit(fmt.Errorf("staging the commit of %s at %s: %w", b.Spec.Target, b.Hi, err))
	}
	if s.beforeCommit != nil {
		s.beforeCommit(ctx)
	}
	if _, err := tx.Commit(ctx); err != nil {
		if errors.Is(err, table.ErrCommitFailed) {
			// A clean conflict: nothing was committed, the files are orphans.
			s.removeFiles(ctx, tbl, written)
		}
		return classifyCommit(fmt.Errorf("committing %s at %s: %w", b.Spec.Target, b.Hi, err))
	}
	return nil
}

func (s *Sink) writeData(ctx context.Context, tbl *table.Table, b sinks.Batch, l layout, p plan) ([]iceberg.DataFile, error) {
	if p.upserts == 0 {
		return nil, nil
	}
	rec, err := project(ctx, b.Record, p.upsert, l.cols, tbl.Schema())
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", l.table, err)
	}
	defer rec.Release()
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, rec.Schema(), one(rec)) {
		if err != nil {
			return files, classifyWrite(fmt.Errorf("table %s: writing data file: %w", l.table, err))
		}
		files = append(files, df)
	}
	return files, nil
}

func (s *Sink) writeDeletes(ctx context.Context, tx *table.Transaction, tbl *table.Table, b sinks.Batch, l layout, p plan) ([]iceberg.DataFile, error) {
	if p.deletes == 0 {
		return nil, nil
	}
	keys := l.keyCols()
	ids := make([]int, len(keys))
	for i, k := range keys {
		f, _ := tbl.Schema().FindFieldByName(k.name)
		ids[i] = f.ID
	}
	// A delete carries only the key, and an update the new image: the partition a row is in
	// follows from its key only when the table is partitioned by key columns alone. Otherwise
	// each delete goes where the row it deletes is (deletesScope).
	scope, specID, err := deletesScope(tbl, l)
	if err != nil {
		return nil, err
	}
	var recs []arrow.RecordBatch
	if scope == scopeOldImage {
		recs, err = oldImages(ctx, tbl, b, p.delKey, l)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", l.table, err)
		}
	} else {
		rec, err := project(ctx, b.Record, p.delKey, keys, tbl.Schema())
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", l.table, err)
		}
		recs = []arrow.RecordBatch{rec}
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if len(recs) == 0 {
		return nil, nil // none of the keys is in the table
	}
	writer := tx
	if scope == scopeGlobal {
		global, err := globalDeleteWriter(tbl, specID)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", l.table, err)
		}
		writer = global.NewTransaction()
	}
	files, err := writer.WriteEqualityDeletes(ctx, ids, all(recs))
	if err != nil {
		return files, classifyWrite(fmt.Errorf("table %s: writing equality delete file: %w", l.table, err))
	}
	return files, nil
}

// removeFiles deletes files written for a commit that did not happen. Failing to is harmless
// (orphans, removed by orphan cleanup), so it only logs.
func (s *Sink) removeFiles(ctx context.Context, tbl *table.Table, files []iceberg.DataFile) {
	if len(files) == 0 {
		return
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "cannot remove uncommitted files", logkey.Error, err)
		return
	}
	for _, f := range files {
		if err := fs.Remove(f.FilePath()); err != nil {
			s.log.WarnContext(ctx, "cannot remove uncommitted file", logkey.File, f.FilePath(), logkey.Error, err)
		}
	}
}

// classifyWrite marks schema errors of the writers as poison; I/O errors stay transient.
func classifyWrite(err error) error {
	if errors.Is(err, iceberg.ErrInvalidSchema) || errors.Is(err, iceberg.ErrType) {
		return sinks.Poison(err)
	}
	return err
}

// classifyCommit leaves conflicts ("branch main has changed", table.ErrCommitFailed) and catalog
// or network failures transient; the retry reloads the table and re-checks the position.
func classifyCommit(err error) error {
	if errors.Is(err, iceberg.ErrInvalidSchema) {
		return sinks.Poison(err)
	}
	return err
}
