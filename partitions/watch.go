package partitions

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// Policy is a table's reaction to a partition change the WAL cannot show
// (tables[].on_partition_change).
type Policy string

// The policies; "" means PolicyResync.
const (
	// PolicyResync discards the target and backfills it from a new snapshot, as after a
	// TRUNCATE of the table: exact.
	PolicyResync Policy = "resync"
	// PolicyStop fails the table with failure.PartitionChanged until the operator resyncs it.
	PolicyStop Policy = "stop"
)

// Catalog reads the source's partitions as they are now (a *source.Fetcher).
type Catalog interface {
	// Partitions lists the partitions of those of tables that are partitioned (see
	// source.ListPartitions).
	Partitions(ctx context.Context, tables []batch.TableName) (map[batch.TableName][]source.Partition, error)
	// PartitionHasRows reports whether partition holds a row that where keeps.
	PartitionHasRows(ctx context.Context, partition batch.TableName, where string) (bool, error)
}

// Table is one replicated table the Watcher watches: its policy and row filter.
type Table struct {
	Name   batch.TableName
	Policy Policy
	Where  string // tables[].where: rows outside it never reach the sink
}

// Reaction asks a table to react to partition changes.
type Reaction struct {
	Table  batch.TableName
	Policy Policy
	// Reason says what changed, partition by partition.
	Reason string
	// ref is the record the change was found against.
	ref Record
}

// Epoch names the backfill whose content the change was found against ("" before any
// recorded one): a table that backfilled since ignores a stop of an older epoch.
func (r Reaction) Epoch() string { return r.ref.Epoch }

// StopMessage is the error a table with PolicyStop fails with: what changed and the remedy.
func (r Reaction) StopMessage() string {
	return fmt.Sprintf("table %s: %s; the sink can no longer follow the table from the WAL, and tables[].on_partition_change is stop: "+
		"the table stops. Remedy: `sluice resync --table %s` rebuilds its target from a new snapshot (or set on_partition_change: resync to do that by itself)",
		r.Table, r.Reason, r.Table)
}

// Watcher compares the partitions of a pipeline's partitioned tables with the sets their sink
// content corresponds to (see the package doc). It is used by one goroutine at a time.
type Watcher struct {
	Pipeline string
	Tables   []Table
	Store    staging.State
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Check reads the current partitions of the tables from cat and returns the reactions due. A new
// partition without rows is accepted and recorded; a table already asked to resync for its
// current record is not asked again until its backfill records a new base. Check and Reacted
// are idempotent: a reaction that was not marked done (Reacted) is returned again.
func (w *Watcher) Check(ctx context.Context, cat Catalog) ([]Reaction, error) {
	names := make([]batch.TableName, len(w.Tables))
	for i, t := range w.Tables {
		names[i] = t.Name
	}
	cur, err := cat.Partitions(ctx, names)
	if err != nil {
		return nil, err
	}
	var out []Reaction
	for _, t := range w.Tables {
		parts, partitioned := cur[t.Name]
		if !partitioned {
			continue
		}
		r, err := w.check(ctx, cat, t, parts)
		if err != nil {
			return out, fmt.Errorf("table %s: checking its partitions: %w", t.Name, err)
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, nil
}

func (w *Watcher) check(ctx context.Context, cat Catalog, t Table, parts []source.Partition) (*Reaction, error) {
	ref, fromReader, ok, err := reference(ctx, w.Store, w.Pipeline, t.Name)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Never seen: a table whose backfill has not recorded its snapshot yet (that backfill
		// will) or one replicated before partition sets were recorded (its content is taken to
		// match the partitions of now; a resync records an exact base).
		w.log().Info("recording the partitions of a partitioned table", logkey.Table, t.Name.String(), logkey.Partitions, len(parts))
		return nil, w.accept(ctx, Record{Table: t.Name}, parts)
	}
	if fromReader && ref.Pending != "" {
		return nil, nil // asked to resync; waiting for its backfill's base
	}
	d := Compare(ref.Partitions, parts)
	if d.Empty() {
		return nil, nil
	}
	var withRows []source.Partition
	for _, p := range d.New {
		has, err := cat.PartitionHasRows(ctx, p.Table, t.Where)
		if err != nil {
			return nil, err
		}
		if has {
			withRows = append(withRows, p)
		}
	}
	if len(d.Gone) == 0 && len(d.Rewritten) == 0 && len(withRows) == 0 {
		w.log().Info("new empty partitions: nothing to copy", logkey.Table, t.Name.String(), logkey.Partitions, tableNames(d.New))
		return nil, w.accept(ctx, ref, parts)
	}
	policy := t.Policy
	if policy == "" {
		policy = PolicyResync
	}
	return &Reaction{Table: t.Name, Policy: policy, Reason: d.reason(withRows), ref: ref}, nil
}

// Reacted records that r was acted on. For PolicyResync it marks the table as waiting for its
// backfill (the reaction is not repeated until that backfill records a new base). For
// PolicyStop nothing is recorded: while the difference stands, every Check returns it again, so
// a table resumed without a resync stops again.
func (w *Watcher) Reacted(ctx context.Context, r Reaction) error {
	if r.Policy != PolicyResync {
		return nil
	}
	rec := r.ref
	rec.Pending = r.Reason
	rec.Recorded = w.now()
	return put(ctx, w.Store, w.Pipeline, readerName(r.Table), rec)
}

// Resyncing records that the table was asked to resync for another reason (a TRUNCATE of the
// root, which replaces every partition's storage too): the watch does not ask again for the
// changes it would see until the resync's backfill records a new base. A table without a record
// (not partitioned, or not seen yet) is left alone.
func (w *Watcher) Resyncing(ctx context.Context, table batch.TableName, reason string) error {
	ref, _, ok, err := reference(ctx, w.Store, w.Pipeline, table)
	if err != nil || !ok {
		return err
	}
	ref.Pending, ref.Recorded = reason, w.now()
	return put(ctx, w.Store, w.Pipeline, readerName(table), ref)
}

// accept records parts as the table's set, extending ref's epoch.
func (w *Watcher) accept(ctx context.Context, ref Record, parts []source.Partition) error {
	return put(ctx, w.Store, w.Pipeline, readerName(ref.Table), Record{Table: ref.Table, Epoch: ref.Epoch, Partitions: slices.Clone(parts), Recorded: w.now()})
}

func (w *Watcher) log() *slog.Logger {
	if w.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Logger
}

func (w *Watcher) now() time.Time {
	if w.Now == nil {
		return time.Now()
	}
	return w.Now()
}

func tableNames(ps []source.Partition) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Table.String()
	}
	return out
}
