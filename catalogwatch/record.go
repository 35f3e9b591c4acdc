package catalogwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// Record is a table's storage (and, for a partitioned table, its partition set) as its sink
// content corresponds to it.
type Record struct {
	Table batch.TableName `json:"table"`
	// Epoch names the backfill whose snapshot the content starts from (its snapshot's name and
	// position); "" before any backfill recorded one.
	Epoch string `json:"epoch"`
	// Storage is the table's own storage; nil in a record of an older release (the table's
	// next check records it).
	Storage    *source.TableStorage `json:"storage,omitempty"`
	Partitions []source.Partition   `json:"partitions"`
	Recorded   time.Time            `json:"recorded"`
	// Pending, in the reader's record, is the reaction asked of the table for a change of this
	// epoch's set: the reader waits for the backfill it asked for (a new epoch) instead of
	// asking again.
	Pending string `json:"pending,omitempty"`
}

// Epoch names a backfill's snapshot: its exported name and position.
func Epoch(snapshot string, pos batch.Position) string { return snapshot + "@" + pos.String() }

// baseName and readerName are the documents' names: the base, written by each backfill under
// its snapshot, and the reader's record of the changes it accepted since.
func baseName(t batch.TableName) string   { return "partitions/" + t.String() + "/base" }
func readerName(t batch.TableName) string { return "partitions/" + t.String() + "/reader" }

// RecordSnapshot records the storage of a backfill's snapshot as the table's base, with epoch
// naming the snapshot. st is the storage under the snapshot (source.Snapshot.Storage); call it
// before the backfill's rows are committed, so the base never lags the content.
func RecordSnapshot(ctx context.Context, store staging.State, pipeline string, table batch.TableName, epoch string, st source.Storage, now time.Time) error {
	return put(ctx, store, pipeline, baseName(table), newRecord(table, epoch, st, now))
}

// newRecord is the record of storage st.
func newRecord(table batch.TableName, epoch string, st source.Storage, now time.Time) Record {
	own := st.TableStorage
	own.Columns = slices.Clone(own.Columns)
	return Record{Table: table, Epoch: epoch, Storage: &own, Partitions: slices.Clone(st.Partitions), Recorded: now}
}

// reference returns the set the table's sink content corresponds to, and the reader's record
// when it is the one that applies (it extends the current base). ok is false when neither
// exists: the table was never seen.
func reference(ctx context.Context, store staging.State, pipeline string, table batch.TableName) (ref Record, fromReader, ok bool, err error) {
	base, hasBase, err := get(ctx, store, pipeline, baseName(table))
	if err != nil {
		return Record{}, false, false, err
	}
	rd, hasReader, err := get(ctx, store, pipeline, readerName(table))
	if err != nil {
		return Record{}, false, false, err
	}
	switch {
	case hasReader && (!hasBase || rd.Epoch == base.Epoch):
		return rd, true, true, nil
	case hasBase:
		return base, false, true, nil
	}
	return Record{}, false, false, nil
}

func get(ctx context.Context, store staging.State, pipeline, name string) (Record, bool, error) {
	data, err := store.GetState(ctx, pipeline, name)
	if errors.Is(err, staging.ErrNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return Record{}, false, fmt.Errorf("decoding %s of pipeline %s: %w", name, pipeline, err)
	}
	return r, true, nil
}

func put(ctx context.Context, store staging.State, pipeline, name string, r Record) error {
	if r.Partitions == nil {
		r.Partitions = []source.Partition{}
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding %s of pipeline %s: %w", name, pipeline, err)
	}
	return store.PutState(ctx, pipeline, name, data)
}
