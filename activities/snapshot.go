package activities

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/backfill"
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/catalogwatch"
	"github.com/sluicecdc/sluice/commit"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/faults"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/metrics"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// Backfill holds the backfill activities. BeginSnapshot, CopyChunk and EndSnapshot run in one
// Temporal session, on the worker that holds the exported snapshot's connection; losing that
// worker loses the snapshot, so the TableWorkflow run fails and its next run discards the
// partial copy (DiscardSnapshot) and starts again.
//
// Contract with the sinks: chunks are applied with Phase snapshot and a zero Hi, which writes
// rows without moving the committed position; EndSnapshot commits the snapshot's position. So a
// table shows a position only once its snapshot is complete, and a table without one is
// backfilled from scratch.
type Backfill struct {
	Sinks   SinkProvider
	Sources SourceConfigs
	Logger  *slog.Logger
	// Mem allocates the chunks' records; nil means memory.DefaultAllocator.
	Mem memory.Allocator
	// Faults are the testing hooks of SLUICE_FAULTS (package internal/faults); nil in production
	// and empty in a build without the faults tag.
	Faults *faults.Points
	// Metrics records backfill progress; nil records nothing.
	Metrics *metrics.Metrics
	// Authority is the worker's config that every input is checked against; nil refuses all.
	Authority *Authority
	// CatalogRecords keeps each table's storage (and a partitioned table's partition set) under each
	// backfill's snapshot (package catalogwatch); nil records none.
	CatalogRecords staging.State

	mu   sync.Mutex
	open map[string]*backfill.Session // by exported snapshot name
}

// SnapshotInfo describes an exported snapshot.
type SnapshotInfo struct {
	// Name is the exported snapshot's name (SET TRANSACTION SNAPSHOT takes it).
	Name string `json:"name"`
	// Position is the snapshot's consistent point in the pipeline's stream: changes at or below it
	// are in the snapshot; it becomes the table's committed position when the copy completes.
	Position batch.SourcePosition `json:"position"`
	// EstimatedRows is the planner's estimate of the table's rows (progress display only).
	EstimatedRows int64 `json:"estimated_rows"`
}

// BeginSnapshotInput names the table to snapshot.
type BeginSnapshotInput struct {
	Table TableConfig `json:"table"`
}

// BeginSnapshot exports a snapshot consistent with the pipeline's slot and keeps its connection
// open on this worker for the session's CopyChunk and EndSnapshot. A snapshot this worker still
// holds for the same table (from a run that failed) is released first.
func (a *Backfill) BeginSnapshot(ctx context.Context, in BeginSnapshotInput) (_ SnapshotInfo, err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in.Table); err != nil {
		return SnapshotInfo{}, err
	}
	cfg, err := sourceConfig(a.Sources, in.Table.Pipeline, "", "", []TableConfig{in.Table})
	if err != nil {
		return SnapshotInfo{}, err
	}
	a.release(ctx, func(h *backfill.Session) bool { return h.Table() == in.Table.Table() })
	// The backfill begins with DiscardSnapshot, which may drop the target: create it again.
	sink, err := a.Sinks.Sink(ctx, in.Table.Sink)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("opening sink %s for table %s: %w", in.Table.Sink.Name, in.Table.Table(), err)
	}
	if err := commit.SinkError(in.Table, "creating target", sink.EnsureTable(ctx, in.Table.Spec)); err != nil {
		return SnapshotInfo{}, err
	}
	snap, err := source.OpenSnapshot(ctx, cfg)
	if err != nil {
		return SnapshotInfo{}, sourceError("exporting a snapshot for table "+in.Table.Table().String(), err)
	}
	est, err := snap.Estimate(ctx, in.Table.Table())
	if err != nil {
		_ = snap.Close(context.WithoutCancel(ctx))
		return SnapshotInfo{}, sourceError("estimating the rows of table "+in.Table.Table().String(), err)
	}
	if err := a.recordStorage(ctx, in.Table, snap); err != nil {
		_ = snap.Close(context.WithoutCancel(ctx))
		return SnapshotInfo{}, err
	}
	a.Metrics.BackfillStarted(in.Table.Pipeline, in.Table.Table().String(), est)
	a.mu.Lock()
	if a.open == nil {
		a.open = map[string]*backfill.Session{}
	}
	a.open[snap.Name()] = backfill.NewSession(in.Table.Table(), snap)
	a.mu.Unlock()
	logOrDiscard(a.Logger).Info("snapshot exported", logkey.Table, in.Table.Table().String(),
		logkey.LSN, batch.Position{LSN: snap.LSN()}.String(), logkey.EstimatedRows, est)
	return SnapshotInfo{
		Name:          snap.Name(),
		Position:      batch.SourcePosition{Source: snap.Source(), Position: batch.Position{LSN: snap.LSN()}},
		EstimatedRows: est,
	}, nil
}

// recordStorage records the storage of the table (and the partitions of a partitioned one)
// as its snapshot shows them: what the backfill's content corresponds to
// (catalogwatch.RecordSnapshot).
func (a *Backfill) recordStorage(ctx context.Context, t TableConfig, snap *source.Snapshot) error {
	if a.CatalogRecords == nil {
		return nil
	}
	all, err := snap.Storage(ctx, []batch.TableName{t.Table()})
	if err != nil {
		return sourceError("reading the storage of table "+t.Table().String()+" under its snapshot", err)
	}
	st, ok := all[t.Table()]
	if !ok {
		return nil // gone under the snapshot: the copy fails by itself
	}
	epoch := catalogwatch.Epoch(snap.Name(), batch.Position{LSN: snap.LSN()})
	if err := catalogwatch.RecordSnapshot(ctx, a.CatalogRecords, t.Pipeline, t.Table(), epoch, st, time.Now()); err != nil {
		return fmt.Errorf("recording the storage of table %s under its snapshot: %w", t.Table(), err)
	}
	return nil
}

// CopyChunkInput asks for the next chunk of a snapshot, in primary key order after After.
type CopyChunkInput struct {
	Table    TableConfig  `json:"table"`
	Snapshot SnapshotInfo `json:"snapshot"`
	// After holds the key columns' text values of the last row copied; empty for the first chunk.
	After   []string `json:"after,omitempty"`
	MaxRows int      `json:"max_rows"`
}

// CopyChunkResult reports one copied chunk.
type CopyChunkResult struct {
	Rows int64    `json:"rows"`
	Last []string `json:"last,omitempty"` // key of the last row copied: the next chunk's After
	Done bool     `json:"done"`           // no rows after Last
}

// CopyChunk reads one keyset-paginated chunk under the snapshot and applies it to the sink as a
// snapshot batch (rows only, zero Hi). Re-applying a chunk is idempotent (upsert by key). Unless
// the chunk is the last, the next one is read ahead while this one is applied.
func (a *Backfill) CopyChunk(ctx context.Context, in CopyChunkInput) (_ CopyChunkResult, err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in.Table); err != nil {
		return CopyChunkResult{}, err
	}
	held, err := a.held(in.Snapshot.Name, in.Table.Table())
	if err != nil {
		return CopyChunkResult{}, err
	}
	schema := in.Table.Spec.Schema
	keys := schema.KeyIndexes()
	if len(in.After) != 0 && len(in.After) != len(keys) {
		return CopyChunkResult{}, failure.Newf(failure.SourceSetup,
			"table %s: chunk cursor has %d values for %d key columns", schema.Table, len(in.After), len(keys))
	}
	limit := in.MaxRows
	if limit <= 0 {
		limit = 50_000
	}
	mem := a.allocator()
	// Heartbeats through the read and the write, however long (CopyChunk never reads them back).
	beat := startBeat(ctx, 0, beatInterval, sendHeartbeat[int])
	defer beat.stop()
	c, err := held.ReadChunk(ctx, mem, schema, in.After, limit)
	if err != nil {
		return CopyChunkResult{}, sourceError(fmt.Sprintf("reading a chunk of table %s", schema.Table), err)
	}
	defer c.Rec.Release()
	beat.record(ctx, c.Rows)
	res := CopyChunkResult{Rows: int64(c.Rows), Done: c.Rows < limit}
	if c.Rows == 0 {
		res.Last = in.After
		return res, nil
	}
	res.Last = c.Last
	if !res.Done {
		// The next chunk is read while this one is written (see backfill.Session).
		held.ReadAheadFrom(ctx, mem, schema, res.Last, limit)
	}
	if err := a.applyRecord(ctx, in.Table, c.Rec, batch.SourcePosition{}); err != nil {
		return CopyChunkResult{}, err
	}
	return res, nil
}

// EndSnapshotInput names the snapshot to finish.
type EndSnapshotInput struct {
	Table    TableConfig  `json:"table"`
	Snapshot SnapshotInfo `json:"snapshot"`
}

// EndSnapshot commits the snapshot's position to the sink (the table is now backfilled) and
// releases the snapshot's connection.
func (a *Backfill) EndSnapshot(ctx context.Context, in EndSnapshotInput) (err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in.Table); err != nil {
		return err
	}
	if _, err := a.held(in.Snapshot.Name, in.Table.Table()); err != nil {
		return err
	}
	if err := a.apply(ctx, in.Table, nil, in.Snapshot.Position); err != nil {
		return err
	}
	a.release(ctx, func(h *backfill.Session) bool { return h.Snapshot().Name() == in.Snapshot.Name })
	logOrDiscard(a.Logger).Info("snapshot committed", logkey.Table, in.Table.Table().String(),
		logkey.LSN, in.Snapshot.Position.Position.String())
	return nil
}

// CloseSnapshots releases every snapshot a worker's Backfill activities still hold; the worker
// calls it on shutdown. (A function, not a method: every exported method of an activity struct
// is registered as an activity.)
func CloseSnapshots(ctx context.Context, a *Backfill) {
	a.release(ctx, func(*backfill.Session) bool { return true })
}

// allocator is the memory allocator of the chunks' records.
func (a *Backfill) allocator() memory.Allocator {
	if a.Mem == nil {
		return memory.DefaultAllocator
	}
	return a.Mem
}

// apply writes snapshot rows (hi zero) or the snapshot's end (no rows, hi set) to the sink.
func (a *Backfill) apply(ctx context.Context, t TableConfig, rows []batch.Change, hi batch.SourcePosition) error {
	b, err := batch.NewRecordBuilder(a.allocator(), t.Spec.Schema)
	if err != nil {
		return failure.New(failure.PoisonBatch, fmt.Sprintf("table %s: %v", t.Table(), err), err)
	}
	defer b.Release()
	rec, err := b.Build(rows, time.Now())
	if err != nil {
		return failure.New(failure.PoisonBatch, fmt.Sprintf("table %s: snapshot rows cannot be converted: %v", t.Table(), err), err)
	}
	defer rec.Release()
	return a.applyRecord(ctx, t, rec, hi)
}

// applyRecord writes a record of snapshot rows (hi zero), or an empty one with the snapshot's
// end (hi set), to the sink.
func (a *Backfill) applyRecord(ctx context.Context, t TableConfig, rec arrow.RecordBatch, hi batch.SourcePosition) error {
	sink, err := a.Sinks.Sink(ctx, t.Sink)
	if err != nil {
		return fmt.Errorf("opening sink %s for table %s: %w", t.Sink.Name, t.Table(), err)
	}
	err = sink.Apply(ctx, sinks.Batch{Spec: t.Spec, Phase: batch.PhaseSnapshot, Record: rec, Lo: hi, Hi: hi})
	if err == nil && rec != nil {
		a.Metrics.BackfillCopied(t.Pipeline, t.Table().String(), rec.NumRows())
	}
	return commit.SinkError(t, "writing snapshot rows into", err)
}

// held returns the snapshot this worker holds under name, or a SnapshotSessionLost error.
func (a *Backfill) held(name string, table batch.TableName) (*backfill.Session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.open[name]
	if !ok || h.Table() != table {
		return nil, failure.Newf(failure.SnapshotSessionLost,
			"table %s: this worker does not hold snapshot %s (the worker that exported it is gone); the run re-snapshots", table, name)
	}
	return h, nil
}

// release closes and forgets the held snapshots that match.
func (a *Backfill) release(ctx context.Context, match func(*backfill.Session) bool) {
	a.mu.Lock()
	var closing []*backfill.Session
	for name, h := range a.open {
		if match(h) {
			closing = append(closing, h)
			delete(a.open, name)
		}
	}
	a.mu.Unlock()
	for _, h := range closing {
		h.StopReadAhead()
		if err := h.Snapshot().Close(context.WithoutCancel(ctx)); err != nil {
			logOrDiscard(a.Logger).Warn("closing snapshot", logkey.Table, h.Table().String(), logkey.Error, err)
		}
	}
}

// DiscardSnapshot removes a partially applied snapshot: every row and the position of the
// table's target. A backfill starts with it, so a copy interrupted by a lost session is never
// trusted. It then ensures the emptied target (a column dropped there by hand comes back). It is
// idempotent.
func (a *Backfill) DiscardSnapshot(ctx context.Context, in TableConfig) (err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in); err != nil {
		return err
	}
	sink, err := a.Sinks.Sink(ctx, in.Sink)
	if err != nil {
		return fmt.Errorf("opening sink %s for table %s: %w", in.Sink.Name, in.Table(), err)
	}
	if err := sink.DiscardSnapshot(ctx, in.Spec); err != nil {
		return commit.SinkError(in, "discarding the partial snapshot in", err)
	}
	// The target holds no rows now: a column dropped from it outside Sluice, which EnsureTable
	// does not add back while rows lack its values, comes back for the backfill to fill.
	return commit.SinkError(in, "ensuring the emptied target", sink.EnsureTable(ctx, in.Spec))
}
