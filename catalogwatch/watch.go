package catalogwatch

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// Policy is a table's reaction to a change the WAL cannot show: a partition change
// (tables[].on_partition_change) or a rewrite of its values (tables[].on_rewrite).
type Policy string

// The policies; "" means PolicyResync.
const (
	// PolicyResync discards the target and backfills it from a new snapshot, as after a
	// TRUNCATE of the table: exact.
	PolicyResync Policy = "resync"
	// PolicyStop fails the table (failure.PartitionChanged or failure.TableRewritten) until the
	// operator resyncs it.
	PolicyStop Policy = "stop"
)

// Catalog reads the source's catalog as it is now (a *source.Fetcher).
type Catalog interface {
	// Storage reads the storage of those of tables that exist, with the partitions of the
	// partitioned ones (see source.ListStorage).
	Storage(ctx context.Context, tables []batch.TableName) (map[batch.TableName]source.Storage, error)
	// PartitionHasRows reports whether partition holds a row that where keeps.
	PartitionHasRows(ctx context.Context, partition batch.TableName, where string) (bool, error)
}

// Table is one replicated table the Watcher watches: its policies and row filter.
type Table struct {
	Name batch.TableName
	// Policy is the reaction to a partition change, OnRewrite to a rewrite of values.
	Policy    Policy
	OnRewrite Policy
	Where     string // tables[].where: rows outside it never reach the sink
}

// Reaction asks a table to react to changes the WAL cannot show.
type Reaction struct {
	Table  batch.TableName
	Policy Policy
	// ErrType is the error type a stop fails the table with: failure.TableRewritten when the
	// stop is for a rewrite of values, else failure.PartitionChanged.
	ErrType string
	// Reason says what changed, partition by partition and column by column.
	Reason string
	// Seen says where the check that found it ran (Check's seen).
	Seen string
	// ref is the record the change was found against.
	ref Record
}

// Epoch names the backfill whose content the change was found against ("" before any
// recorded one): a table that backfilled since ignores a stop of an older epoch.
func (r Reaction) Epoch() string { return r.ref.Epoch }

// StopMessage is the error a table with PolicyStop fails with: what changed, where it was seen
// and the remedy.
func (r Reaction) StopMessage() string {
	key := "on_partition_change"
	if r.ErrType == failure.TableRewritten {
		key = "on_rewrite"
	}
	return fmt.Sprintf("table %s: %s (seen %s); the sink can no longer follow the table from the WAL, and tables[].%s is stop: "+
		"the table stops. Remedy: `sluice resync --table %s` rebuilds its target from a new snapshot (or set %s: resync to do that by itself)",
		r.Table, r.Reason, r.Seen, key, r.Table, key)
}

// Watcher compares the storage of a pipeline's tables, and the partitions of its partitioned
// ones, with what their sink content corresponds to (see the package doc). It is used by one
// goroutine at a time.
type Watcher struct {
	Pipeline string
	Tables   []Table
	Store    staging.State
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// settled is, per table, the storage last found equal to the table's record (or recorded)
	// and the base that record extended: while the catalog still shows that storage and no
	// backfill recorded a new base, the reader's record (written only by this Watcher during a
	// run) need not be read again.
	settled map[batch.TableName]settledStorage
}

type settledStorage struct {
	st   source.Storage
	base string // the base's epoch; "" when there was none
}

// Check reads the current storage of the tables (of only those in only, when it is not nil)
// from cat and returns the reactions due; seen says where the check runs, for the messages. A
// new partition without rows and a rewrite that changed no value (VACUUM FULL, CLUSTER) are
// accepted and recorded; a table whose OID changed (dropped and re-created) is recorded anew
// without a reaction (the identity check's case); a table already asked to resync for its
// current record is not asked again until its backfill records a new base. Check and Reacted
// are idempotent: a reaction that was not marked done (Reacted) is returned again.
func (w *Watcher) Check(ctx context.Context, cat Catalog, only []batch.TableName, seen string) ([]Reaction, error) {
	var tables []Table
	var names []batch.TableName
	for _, t := range w.Tables {
		if only == nil || slices.Contains(only, t.Name) {
			tables, names = append(tables, t), append(names, t.Name)
		}
	}
	if len(tables) == 0 {
		return nil, nil
	}
	cur, err := cat.Storage(ctx, names)
	if err != nil {
		return nil, err
	}
	var out []Reaction
	for _, t := range tables {
		st, ok := cur[t.Name]
		if !ok {
			continue // gone or renamed: not a storage change (the reader and setup see it)
		}
		if prev, ok := w.settled[t.Name]; ok && reflect.DeepEqual(prev.st, st) {
			base, _, err := get(ctx, w.Store, w.Pipeline, baseName(t.Name))
			if err != nil {
				return out, fmt.Errorf("table %s: checking its storage: %w", t.Name, err)
			}
			if base.Epoch == prev.base {
				continue
			}
		}
		delete(w.settled, t.Name)
		r, err := w.check(ctx, cat, t, st, seen)
		if err != nil {
			return out, fmt.Errorf("table %s: checking its storage: %w", t.Name, err)
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, nil
}

func (w *Watcher) check(ctx context.Context, cat Catalog, t Table, st source.Storage, seen string) (*Reaction, error) {
	ref, fromReader, ok, err := reference(ctx, w.Store, w.Pipeline, t.Name)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Never seen: a table whose backfill has not recorded its snapshot yet (that backfill
		// will) or one replicated before storage was recorded (its content is taken to match
		// the storage of now; a resync records an exact base).
		w.log().Info("recording the storage of a table", logkey.Table, t.Name.String(), logkey.Partitions, len(st.Partitions))
		return nil, w.accept(ctx, Record{Table: t.Name}, st)
	}
	if fromReader && ref.Pending != "" {
		return nil, nil // asked to resync; waiting for its backfill's base
	}
	legacy := ref.Storage == nil
	if legacy {
		// A record of an older release: its partitions are compared, its own storage is
		// recorded now.
		ref.Storage = &st.TableStorage
	}
	if ref.Storage.OID != st.OID {
		// A new table under the same name: not a rewrite of this one (the identity check
		// reacts to it). Its storage is what any later rewrite is compared with.
		w.log().Info("the table has a new OID: recording its storage anew", logkey.Table, t.Name.String())
		return nil, w.accept(ctx, ref, st)
	}
	rw := CompareStorage(*ref.Storage, st.TableStorage)
	var d Diff
	var withRows []source.Partition
	if st.Partitioned {
		d = Compare(ref.Partitions, st.Partitions)
		for _, p := range d.New {
			has, err := cat.PartitionHasRows(ctx, p.Table, t.Where)
			if err != nil {
				return nil, err
			}
			if has {
				withRows = append(withRows, p)
			}
		}
	}
	parts := ""
	if len(d.Gone)+len(d.Rewritten)+len(d.Reattached)+len(withRows) > 0 {
		parts = d.reason(withRows)
	}
	values := rw.reason()
	if parts == "" && values == "" {
		if !legacy && reflect.DeepEqual(*ref.Storage, st.TableStorage) && slices.Equal(ref.Partitions, st.Partitions) {
			w.settle(t.Name, st, ref.Epoch)
			return nil, nil
		}
		if err := w.acceptQuietly(ctx, t, ref, st, rw, d); err != nil {
			return nil, err
		}
		w.settle(t.Name, st, ref.Epoch)
		return nil, nil
	}
	re := &Reaction{Table: t.Name, Policy: PolicyResync, ErrType: failure.PartitionChanged, Seen: seen, ref: ref}
	re.Reason = strings.Join(slices.DeleteFunc([]string{values, parts}, func(s string) bool { return s == "" }), "; ")
	switch {
	case values != "" && t.OnRewrite == PolicyStop:
		re.Policy, re.ErrType = PolicyStop, failure.TableRewritten
	case parts != "" && t.Policy == PolicyStop:
		re.Policy = PolicyStop
	case values != "":
		re.ErrType = failure.TableRewritten
	}
	return re, nil
}

// acceptQuietly records st, which differs from ref without a change to react to, saying why.
func (w *Watcher) acceptQuietly(ctx context.Context, t Table, ref Record, st source.Storage, rw Rewrite, d Diff) error {
	switch {
	case rw.Rewritten:
		w.log().Info("the table's storage was rewritten without a change of its columns (VACUUM FULL, CLUSTER, pg_repack, SET TABLESPACE, or a TRUNCATE the stream carries): nothing to copy",
			logkey.Table, t.Name.String(), logkey.Reason, fmt.Sprintf("relfilenode %d → %d", rw.From, rw.To))
	case len(d.New) > 0:
		w.log().Info("new empty partitions: nothing to copy", logkey.Table, t.Name.String(), logkey.Partitions, tableNames(d.New))
	}
	return w.accept(ctx, ref, st)
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

// Resyncing records that the table was asked to resync for another reason (a TRUNCATE, which
// replaces its storage or its partitions' too): the watch does not ask again for the changes it
// would see until the resync's backfill records a new base. A table without a record (not seen
// yet) is left alone.
func (w *Watcher) Resyncing(ctx context.Context, table batch.TableName, reason string) error {
	ref, _, ok, err := reference(ctx, w.Store, w.Pipeline, table)
	if err != nil || !ok {
		return err
	}
	ref.Pending, ref.Recorded = reason, w.now()
	return put(ctx, w.Store, w.Pipeline, readerName(table), ref)
}

// accept records st as the table's storage, extending ref's epoch.
func (w *Watcher) accept(ctx context.Context, ref Record, st source.Storage) error {
	return put(ctx, w.Store, w.Pipeline, readerName(ref.Table), newRecord(ref.Table, ref.Epoch, st, w.now()))
}

// settle notes that the table's record, which extends the base of epoch base, holds st.
func (w *Watcher) settle(table batch.TableName, st source.Storage, base string) {
	if w.settled == nil {
		w.settled = map[batch.TableName]settledStorage{}
	}
	w.settled[table] = settledStorage{st: st, base: base}
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
