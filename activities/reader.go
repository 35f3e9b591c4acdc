package activities

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

// Reader holds the pipeline's long-running reader activity.
type Reader struct {
	Staging *staging.Store
	Tables  TableStarter
	Sources SourceConfigs
	Logger  *slog.Logger
	// Compression of the staged batch files; empty means zstd.
	Compression batch.Compression
	// ListEvery is how often the reader lists the staging store to learn which batches were
	// acknowledged (which lets it confirm the slot further); 0 means 5 seconds.
	ListEvery time.Duration
}

// ReadStreamInput says what to read and for how long.
type ReadStreamInput struct {
	Pipeline    string         `json:"pipeline"`
	Slot        string         `json:"slot"`
	Publication string         `json:"publication"`
	Source      batch.SourceID `json:"source"`
	Tables      []TableConfig  `json:"tables"`
	// RunFor bounds one activity run; the SourceWorkflow then continues as new.
	RunFor time.Duration `json:"run_for"`
	// Batch limits: a table's batch is cut at MaxRows rows, MaxBytes bytes or MaxWait after its
	// first row, whichever comes first.
	MaxRows  int           `json:"max_rows"`
	MaxBytes int64         `json:"max_bytes"`
	MaxWait  time.Duration `json:"max_wait"`
}

// ReadStreamResult reports one reader run.
type ReadStreamResult struct {
	Position  batch.SourcePosition `json:"position"`  // everything up to here is staged
	Confirmed batch.SourcePosition `json:"confirmed"` // the slot is confirmed up to here
	Batches   int64                `json:"batches"`
	Rows      int64                `json:"rows"`
}

// ReadStream decodes pgoutput from the pipeline's slot, splits changes per table, cuts batches,
// stages each (StageBatch) and confirms the slot only up to what no table still holds: buffered
// changes and staged batches that their table has not committed and acknowledged. It heartbeats
// its position and returns after RunFor. Idle periods send keepalives so a quiet pipeline does
// not hold WAL. A TRUNCATE of a table asks that table to resync (discard and backfill again from
// a snapshot taken after the truncate), which is exact where replaying a truncate is not.
func (a *Reader) ReadStream(ctx context.Context, in ReadStreamInput) (ReadStreamResult, error) {
	cfg, err := sourceConfig(a.Sources, in.Pipeline, in.Slot, in.Publication, in.Tables)
	if err != nil {
		return ReadStreamResult{}, err
	}
	r, err := a.newRun(ctx, cfg, in)
	if err != nil {
		return ReadStreamResult{}, err
	}
	defer r.close(ctx)
	return r.run(ctx)
}

// StageBatch stages one cut batch and signals its table's workflow (starting it when it does not
// run). The file is staged before the signal, so a workflow never holds a ref to nothing; a crash
// between the two leaves a staged file that the table's next LoadTable finds. Idempotent: the
// same range re-staged overwrites, and the workflow de-duplicates refs.
func StageBatch(ctx context.Context, store *staging.Store, tables TableStarter, table TableConfig, ref staging.BatchRef, data io.Reader) (staging.BatchRef, error) {
	staged, err := store.Put(ctx, ref, data)
	if err != nil {
		return staging.BatchRef{}, err
	}
	if err := tables.SignalBatch(ctx, table, staged); err != nil {
		return staging.BatchRef{}, fmt.Errorf("signalling table %s of batch %s: %w", table.Table(), staged.Range(), err)
	}
	return staged, nil
}

// ConfirmablePosition is the position up to which the reader may confirm the slot: the lowest lo
// among the pipeline's staged but unacknowledged batches, or reader (everything up to it staged)
// when none is outstanding. Idle tables have no staged batches and never hold the slot back.
func ConfirmablePosition(ctx context.Context, store *staging.Store, pipeline string, reader batch.SourcePosition) (batch.SourcePosition, error) {
	staged, err := store.ListPipeline(ctx, pipeline)
	if err != nil {
		return batch.SourcePosition{}, err
	}
	pos, err := staging.SafePosition(staged, reader)
	if err != nil {
		return batch.SourcePosition{}, fmt.Errorf("computing confirmable position of pipeline %s: %w", pipeline, err)
	}
	return pos, nil
}
