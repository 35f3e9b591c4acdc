package reader

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/catalogwatch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
)

// CatalogWatch compares the storage of the pipeline's tables, and the partitions of its
// partitioned ones, with what their sinks hold (a *catalogwatch.Watcher).
type CatalogWatch interface {
	// Check returns the reactions due for the tables in only (every table when nil), reading
	// the catalog through cat; seen says where it runs (see catalogwatch.Watcher.Check).
	Check(ctx context.Context, cat catalogwatch.Catalog, only []batch.TableName, seen string) ([]catalogwatch.Reaction, error)
	// Reacted records that a reaction was acted on.
	Reacted(ctx context.Context, r catalogwatch.Reaction) error
	// Resyncing records that a table was asked to resync for another reason.
	Resyncing(ctx context.Context, table batch.TableName, reason string) error
}

// resyncing tells the catalog watch that the table resyncs for another reason (a TRUNCATE),
// so it does not ask again for what that reason changed in its partitions.
func (r *run) resyncing(ctx context.Context, table batch.TableName, reason string) {
	if r.deps.CatalogWatch == nil {
		return
	}
	if err := r.deps.CatalogWatch.Resyncing(ctx, table, reason); err != nil {
		r.log.Warn("recording a resync for the catalog watch; it may ask one more", logkey.Table, table.String(), logkey.Error, err)
	}
}

// TableStopper is an optional capability of Tables: it fails a table's workflow with a
// non-retryable error of type errType, so the table stops until the operator acts, unless the
// table backfilled since from a snapshot other than epoch's (catalogwatch.Reaction.Epoch). A
// table that does not run is left alone. Idempotent and safe for concurrent use.
type TableStopper interface {
	Stop(ctx context.Context, schema batch.Schema, errType, msg, epoch string) error
}

// checkCatalogDue runs the catalog watch (storage and partitions) when it is due (at the run's first
// progress, then every ListEvery) for every table.
func (r *run) checkCatalogDue(ctx context.Context, now time.Time) error {
	if r.deps.CatalogWatch == nil || (!r.catalogChecked.IsZero() && now.Sub(r.catalogChecked) < r.listEvery()) {
		return nil
	}
	seen := "by the periodic check at " + now.UTC().Format(time.RFC3339)
	if r.catalogChecked.IsZero() {
		seen = "at the reader's start, " + now.UTC().Format(time.RFC3339)
	}
	r.catalogChecked = now
	return r.checkCatalog(ctx, nil, seen)
}

// checkCatalog runs the catalog watch (storage and partitions) for the tables in only (every table when
// nil) and makes each table react: a resync as after a TRUNCATE (what the table buffered is
// staged first), or a stop. A failed check is logged and tried again next time: the catalog's
// state does not go away meanwhile, and the slot holds the table's changes.
func (r *run) checkCatalog(ctx context.Context, only []batch.TableName, seen string) error {
	w := r.deps.CatalogWatch
	if w == nil {
		return nil
	}
	cat, ok := r.fetcher.(catalogwatch.Catalog)
	if !ok {
		return nil // a fetcher that cannot read the catalog (tests of other things)
	}
	reactions, err := w.Check(ctx, cat, only, seen)
	if err != nil {
		r.log.Warn("checking the storage and partitions of the tables; trying again at the next check", logkey.Error, err)
	}
	for _, re := range reactions {
		t, ok := r.tables[re.Table]
		if !ok {
			continue
		}
		if err := r.react(ctx, t, re); err != nil {
			return err
		}
		if err := w.Reacted(ctx, re); err != nil {
			r.log.Warn("recording a reaction to a change the WAL cannot show; it may be asked again", logkey.Table, re.Table.String(), logkey.Error, err)
		}
	}
	return nil
}

// react makes table t react to re: a stop with re's error type, or a resync.
func (r *run) react(ctx context.Context, t *table, re catalogwatch.Reaction) error {
	if re.Policy == catalogwatch.PolicyStop {
		if r.stopping[re.Table] != re.Reason {
			r.log.Error("change the WAL cannot show: stopping the table (tables[].on_rewrite or on_partition_change: stop)",
				logkey.Table, re.Table.String(), logkey.Reason, re.Reason)
			if r.stopping == nil {
				r.stopping = map[batch.TableName]string{}
			}
			r.stopping[re.Table] = re.Reason
		}
		stopper, ok := r.deps.Tables.(TableStopper)
		if !ok {
			return failure.New(failure.SourceSetup, re.StopMessage(), nil)
		}
		if err := stopper.Stop(ctx, t.schema, re.ErrType, re.StopMessage(), re.Epoch()); err != nil {
			return fmt.Errorf("stopping table %s after a change the WAL cannot show: %w", re.Table, err)
		}
		return nil
	}
	if err := r.flush(ctx, t); err != nil {
		return err
	}
	if err := r.signal(ctx, t); err != nil {
		return err
	}
	r.log.Warn("change the WAL cannot show: resyncing the table from a new snapshot",
		logkey.Table, re.Table.String(), logkey.Reason, re.Reason)
	if err := r.deps.Tables.Resync(ctx, t.schema); err != nil {
		return fmt.Errorf("asking table %s to resync after a change the WAL cannot show (%s): %w", re.Table, re.Reason, err)
	}
	return nil
}

// listEvery is the run's listing interval, which the catalog watch follows too.
func (r *run) listEvery() time.Duration {
	if r.cfg.ListEvery <= 0 {
		return defaultListEvery
	}
	return r.cfg.ListEvery
}
