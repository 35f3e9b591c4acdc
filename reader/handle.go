package reader

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// handle receives the stream's events on the stream's goroutine.
func (r *run) handle(ctx context.Context, ev source.Event) error {
	now := r.now()
	switch e := ev.(type) {
	case *source.ChangeEvent:
		t, ok := r.tables[e.Table]
		if !ok {
			r.unlistedChange(e)
			return nil
		}
		r.messages++
		before := t.buf.Len()
		var err error
		r.cuts, err = t.buf.Add(r.cuts[:0], e.Change, now)
		if err != nil {
			return err
		}
		switch {
		case t.buf.Len() == 0:
			t.pending = false
		case before == 0 || len(r.cuts) > 0:
			t.first, t.pending = e.Change.Pos, true
		}
		if err := r.stage(ctx, t, r.cuts); err != nil {
			return err
		}
		r.held.setBuffered(e.Table, t.first, t.pending)
	case *source.CommitEvent:
		r.result.Position.Position = batch.Position{LSN: e.LSN}
		r.reading.Store(e.LSN)
	case *source.ProgressEvent:
		r.deps.Metrics.Read(r.cfg.Pipeline, r.messages, r.staged)
		r.messages, r.staged = 0, 0
		if r.deps.Heartbeat != nil {
			r.deps.Heartbeat(ctx, r.result)
		}
		if err := r.checkCatalogDue(ctx, now); err != nil {
			return err
		}
		if err := r.checkIdentityDue(ctx, now); err != nil {
			return err
		}
		if e.CaughtUp && !r.caughtUp {
			r.caughtUp = true
			return r.flushCaughtUp(ctx)
		}
		return r.tick(ctx, now)
	case *source.RelationEvent:
		return r.relationSeen(ctx, e)
	case *source.SchemaEvent:
		return r.schemaChanged(ctx, e)
	case *source.TruncateEvent:
		return r.truncated(ctx, e)
	}
	return nil
}

// tick cuts the batches whose MaxWait passed and sends the signals that are due.
func (r *run) tick(ctx context.Context, now time.Time) error {
	for name, t := range r.tables {
		if t.buf.Len() == 0 {
			continue
		}
		r.cuts = t.buf.Tick(r.cuts[:0], now)
		if len(r.cuts) == 0 {
			continue
		}
		if err := r.stage(ctx, t, r.cuts); err != nil {
			return err
		}
		t.pending = t.buf.Len() > 0 // a Tick cuts everything buffered
		r.held.setBuffered(name, t.first, t.pending)
	}
	return r.signalDue(ctx, now)
}

// flushCaughtUp stages every table's buffer once the backlog a run started with has been read
// (after a restart, a deploy or a pause): its tail reaches the sink now instead of one MaxWait
// later. Only the first time: afterwards a keepalive between transactions is the normal state of
// a quiet stream, whose batches MaxWait shapes.
func (r *run) flushCaughtUp(ctx context.Context) error {
	for _, t := range r.tables {
		if t.buf.Len() == 0 {
			continue
		}
		if err := r.flush(ctx, t); err != nil {
			return err
		}
	}
	return r.signalAll(ctx)
}

// flush stages everything a table has buffered.
func (r *run) flush(ctx context.Context, t *table) error {
	r.cuts = t.buf.Flush(r.cuts[:0])
	if err := r.stage(ctx, t, r.cuts); err != nil {
		return err
	}
	t.pending = false
	r.held.setBuffered(t.schema.Table, t.first, false)
	return nil
}

// schemaChanged stages the table's buffered changes under the old schema, then follows the new
// one. Added columns reach the sink, whose EnsureTable evolves the target when the table's
// workflow commits the first batch that carries them. Columns added with a value for existing
// rows (a default, an identity, a generated column) resync the table (those values are not in
// the WAL), and so do dropped columns unless tables[].on_drop_column is keep (droppedResync).
//
// A renamed table stops the reader: its changes would otherwise be skipped silently. The
// operator updates tables[].source and restarts. A table of the publication that the run does
// not read (removed from the config) holds the slot instead (unlistedTable).
func (r *run) schemaChanged(ctx context.Context, e *source.SchemaEvent) error {
	t, ok := r.tables[e.Table]
	if !ok && !e.Renamed {
		return r.unlistedTable(ctx, e)
	}
	if e.Renamed || !ok {
		old := "a table the pipeline does not know"
		if e.Old != nil {
			old = e.Old.Table.String()
		}
		return failure.Newf(failure.SourceSetup,
			"pipeline %s: %s now streams as %s (renamed or moved) at %s; the reader stops rather than skip its changes: "+
				"set tables[].source to %s in the config, restart the pipeline and resync the table",
			r.cfg.Pipeline, old, e.Table, e.Pos, e.Table)
	}
	if err := r.flush(ctx, t); err != nil {
		return err
	}
	if err := r.signal(ctx, t); err != nil { // its batches under the old schema, first
		return err
	}
	r.log.Warn("table schema changed", logkey.Table, e.Table.String(), logkey.Position, e.Pos.String(),
		logkey.Added, e.Added, logkey.Dropped, e.Dropped, logkey.Retyped, e.Retyped, logkey.Renamed, e.RenamedColumns)
	if err := t.setSchema(e.New); err != nil {
		return err
	}
	if r.replayed(e) {
		return nil
	}
	if err := r.actOnSchema(ctx, t, e); err != nil {
		return err
	}
	return r.recordSchema(ctx, e)
}

// actOnSchema does what schema event e of table t asks for: a stop (the replica identity, or a
// change the stream cannot carry), one resync (columns added with a value for existing rows,
// columns dropped), or nothing more.
func (r *run) actOnSchema(ctx context.Context, t *table, e *source.SchemaEvent) error {
	if e.Identity != "" {
		return r.stopForIdentity(ctx, t, e)
	}
	if what := unfollowable(e); what != "" {
		return r.stopForSchema(ctx, t, e, what)
	}
	// A column added with a default (or as an identity, or generated) holds a value in every
	// existing row, but Postgres writes none of those rows to the WAL: following the stream alone
	// would leave NULL there in the sink for every row not changed since. Only a new snapshot
	// reads them, as after a TRUNCATE.
	defaulted, err := r.fetcher.ColumnsWithDefaults(ctx, e.Table, e.Added)
	if err != nil {
		return fmt.Errorf("table %s: checking the columns added at %s for defaults: %w", e.Table, e.Pos, err)
	}
	var why []string
	if len(defaulted) > 0 {
		r.log.Warn("columns added with a value for existing rows (a default, an identity, a generated column): resyncing the table "+
			"from a new snapshot, since their values in existing rows never stream",
			logkey.Table, e.Table.String(), logkey.Position, e.Pos.String(), logkey.Columns, defaulted)
		why = append(why, fmt.Sprintf("columns %v were added with a value for existing rows", defaulted))
	}
	if dropped := r.droppedResync(e); dropped != "" {
		why = append(why, dropped)
	}
	if len(why) == 0 {
		return nil
	}
	if err := r.deps.Tables.Resync(ctx, t.schema); err != nil {
		return fmt.Errorf("asking table %s to resync after %s at %s: %w", e.Table, strings.Join(why, " and "), e.Pos, err)
	}
	return nil
}

// truncated stages what the table buffered before the TRUNCATE, then asks its workflow to resync.
func (r *run) truncated(ctx context.Context, e *source.TruncateEvent) error {
	t, ok := r.tables[e.Table]
	if !ok {
		return nil
	}
	if err := r.flush(ctx, t); err != nil {
		return err
	}
	if err := r.signal(ctx, t); err != nil { // what it staged before the TRUNCATE, first
		return err
	}
	r.log.Warn("table truncated: resyncing it from a new snapshot", logkey.Table, e.Table.String(), logkey.Position, e.Pos.String())
	if err := r.deps.Tables.Resync(ctx, t.schema); err != nil {
		return fmt.Errorf("asking table %s to resync after its TRUNCATE at %s: %w", e.Table, e.Pos, err)
	}
	r.resyncing(ctx, e.Table, "TRUNCATE at "+e.Pos.String())
	return nil
}

// stage collapses, completes and writes each cut, stages the file and signals the table.
//
// Until a cut is staged, the table is held at the cut's first change (lower than anything still
// buffered), so the slot is never confirmed past changes that are in neither place.
func (r *run) stage(ctx context.Context, t *table, cuts []batch.Cut) error {
	if len(cuts) > 0 {
		r.held.setBuffered(t.schema.Table, cuts[0].Lo, true)
	}
	for i := range cuts {
		c := &cuts[i]
		rows, err := t.col.Collapse(c.Changes)
		if err != nil {
			return err
		}
		if rows, err = r.fetcher.Fill(ctx, t.schema, rows); err != nil {
			return fmt.Errorf("fetching unchanged TOAST values of table %s: %w", c.Table, err)
		}
		rec, err := t.rec.Build(rows, r.now())
		n, firstCommit := len(rows), rows[0].CommitTS
		// The record holds the values now: drop the decoded changes (the cut's, the collapsed
		// and the filled ones), so that the garbage collector frees them while the next batch
		// is read instead of keeping two batches of decoded values alive.
		clear(rows)
		t.col.Clear()
		clear(c.Changes)
		c.Changes = nil
		if err != nil {
			return failure.New(failure.PoisonBatch, fmt.Sprintf("table %s: batch %s..%s cannot be converted: %v", c.Table, c.Lo, c.Hi, err), err)
		}
		lo := batch.SourcePosition{Source: r.cfg.Source, Position: c.Lo}
		hi := batch.SourcePosition{Source: r.cfg.Source, Position: c.Hi}
		var buf bytes.Buffer
		compression := r.cfg.Compression
		if compression == "" {
			compression = batch.DefaultCompression
		}
		err = batch.WriteFile(&buf, rec, batch.FileHeader{Table: c.Table, Lo: lo, Hi: hi, Phase: c.Phase, Columns: t.schema.Columns}, compression)
		rec.Release()
		if err != nil {
			return err
		}
		ref := staging.BatchRef{Pipeline: r.cfg.Pipeline, Table: c.Table, Lo: lo, Hi: hi, Rows: int64(n),
			Bytes: int64(buf.Len()), Phase: c.Phase, FirstCommit: firstCommit}
		staged, err := r.stageBatch(ctx, ref, &buf)
		if err != nil {
			return fmt.Errorf("staging batch %s of table %s: %w", ref.Range(), c.Table, err)
		}
		r.held.addStaged(staged, r.now())
		r.staged += staged.Bytes
		if err := r.queueSignal(ctx, t, staged); err != nil {
			return err
		}
		r.result.Batches++
		r.result.Rows += int64(n)
	}
	return nil
}

// stageBatch stages one batch file; stage then queues its signal to the table (queueSignal).
// The file is staged before the signal, so a table never holds a ref to nothing; a crash between
// the two leaves a staged file that holds the slot, which the next run reads and signals again.
// Idempotent: the same range re-staged overwrites, and the table de-duplicates refs.
func (r *run) stageBatch(ctx context.Context, ref staging.BatchRef, data *bytes.Buffer) (staging.BatchRef, error) {
	return r.deps.Store.Put(ctx, ref, data)
}
