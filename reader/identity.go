package reader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// The values of tables[].on_recreate: how a table reacts when the identity check finds that it
// is no longer the table its sink's content corresponds to, or that the publication did not
// carry all of its changes for a while.
const (
	RecreateStop   = "stop" // the default: fail the table (TableRecreated, PublicationChanged)
	RecreateResync = "resync"
)

// IdentityCatalog reads the catalog's view of the publication and tables (a *source.Fetcher).
type IdentityCatalog interface {
	Identity(ctx context.Context, publication string, tables []batch.TableName) (source.Identity, error)
}

// identityRecord is a table's identity as its sink's content corresponds to it: its relation
// OID, how it is in the publication (source.TableMark.Member, new each time it joins again) and
// what the publication publishes (its marker changes at every ALTER PUBLICATION ... SET). It is
// kept in staging beside the schema record (a document of its own: it changes at other moments
// than the schema, and each is written only by what reacted to its own change). The publication's
// marker is kept per table, not once for the pipeline: each table reacts to a publication change
// on its own, and records it once it did.
type identityRecord struct {
	RelID       uint32                 `json:"relid"`
	Member      string                 `json:"member,omitempty"`
	Publication source.PublicationMark `json:"publication"`
	// Since is where in the stream the record holds from: the WAL position the catalog was read
	// at, or the RELATION it was learned from. A RELATION before it that carries another relation
	// ID comes from WAL older than the record (the slot restarted behind it): already handled.
	Since batch.Position `json:"since"`
}

// identityRecordName is the state document name of table's identity record.
func identityRecordName(table batch.TableName) string { return "identity " + table.String() }

// identityChange says how the catalog's view of table now (now, pub) differs from the identity
// its sink's content corresponds to (rec): the error type of the stop and what changed, or ""
// and "" when nothing did. A new relation OID is TableRecreated; the rest (the table left the
// publication or joined it again, the publication was altered or its flags differ) is
// PublicationChanged.
func identityChange(table batch.TableName, publication string, rec identityRecord, now source.TableMark, pub source.PublicationMark) (errType, what string) {
	switch {
	case now.RelID == 0:
		return failure.TableRecreated, fmt.Sprintf("dropped (relation OID %d no longer exists)", rec.RelID)
	case now.RelID != rec.RelID:
		recreated := fmt.Sprintf("dropped and re-created (relation OID %d → %d)", rec.RelID, now.RelID)
		if now.Member == "" {
			recreated += fmt.Sprintf("; the new table was not in publication %s", publication)
		}
		return failure.TableRecreated, recreated
	}
	var changes []string
	switch {
	case !pub.Exists:
		changes = append(changes, fmt.Sprintf("publication %s no longer exists", publication))
	case rec.Member != "" && now.Member == "":
		changes = append(changes, fmt.Sprintf("left publication %s (ALTER PUBLICATION ... DROP TABLE): its changes are not published", publication))
	case now.Member != rec.Member:
		changes = append(changes, fmt.Sprintf("left publication %s and joined it again (membership %s → %s): its changes in between were not published",
			publication, orNone(rec.Member), orNone(now.Member)))
	}
	if pub.Exists {
		changes = append(changes, publicationChange(publication, rec.Publication, pub)...)
	}
	if len(changes) == 0 {
		return "", ""
	}
	return failure.PublicationChanged, strings.Join(changes, "; ")
}

// publicationChange describes how publication's marker changed from was to now.
func publicationChange(publication string, was, now source.PublicationMark) []string {
	var what []string
	if len(now.Unpublished) > 0 {
		what = append(what, fmt.Sprintf("publication %s does not publish %s: those changes are not streamed", publication, strings.Join(now.Unpublished, ", ")))
	}
	if was.ViaRoot != now.ViaRoot {
		what = append(what, fmt.Sprintf("publication %s's publish_via_partition_root changed from %t to %t", publication, was.ViaRoot, now.ViaRoot))
	}
	if was.AllTables != now.AllTables {
		what = append(what, fmt.Sprintf("publication %s's FOR ALL TABLES changed from %t to %t", publication, was.AllTables, now.AllTables))
	}
	if len(what) > 0 || was.Xmin == now.Xmin {
		return what
	}
	if len(was.Unpublished) > 0 {
		return []string{fmt.Sprintf("publication %s did not publish %s and does again: those changes in between were not streamed",
			publication, strings.Join(was.Unpublished, ", "))}
	}
	return []string{fmt.Sprintf("publication %s was altered (ALTER PUBLICATION ... SET: its catalog row changed, xmin %d → %d) though it "+
		"publishes every change now: its publish flags may have been off in between, and those changes were not streamed",
		publication, was.Xmin, now.Xmin)}
}

func orNone(member string) string {
	if member == "" {
		return "none"
	}
	return member
}

// identityStopMessage is the message of the stop of table for what (identityChange), seen where.
func identityStopMessage(table batch.TableName, what, where string, dropped bool) string {
	if dropped {
		return fmt.Sprintf("table %s: %s, seen %s: the table is stopped. Create it again and resync it: sluice resync --table %s "+
			"(or remove it from tables[] and forget it: sluice remove --table %s)", table, what, where, table, table)
	}
	return fmt.Sprintf("table %s: %s, seen %s. The sink's content no longer corresponds to the source table, and changes made "+
		"meanwhile never streamed: the table is stopped. Remedy: sluice resync --table %s rebuilds its target from a new snapshot "+
		"(or set tables[].on_recreate: resync to do that by itself)", table, what, where, table)
}

// loadIdentities reads the identity recorded for each table of the run (a table without one, as
// after an upgrade, records what the first check sees).
func (r *run) loadIdentities(ctx context.Context) error {
	r.identities = map[batch.TableName]identityRecord{}
	for name := range r.tables {
		data, err := r.deps.Identities.GetState(ctx, r.cfg.Pipeline, identityRecordName(name))
		if errors.Is(err, staging.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("table %s: reading the identity its sink corresponds to: %w", name, err)
		}
		var rec identityRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			return failure.New(failure.SourceSetup, fmt.Sprintf("table %s: the identity record in staging (state %q) cannot be read (%v); "+
				"delete it to record the table as it is now (a drop and re-create made meanwhile is then not seen)",
				name, identityRecordName(name), err), err)
		}
		r.identities[name] = rec
	}
	return nil
}

func (r *run) putIdentity(ctx context.Context, table batch.TableName, rec identityRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("table %s: encoding the identity record: %w", table, err)
	}
	if err := r.deps.Identities.PutState(ctx, r.cfg.Pipeline, identityRecordName(table), data); err != nil {
		return fmt.Errorf("table %s: recording the identity its sink corresponds to: %w", table, err)
	}
	r.identities[table] = rec
	return nil
}

// checkIdentityDue runs the identity check of every table when it is due (every ListEvery).
func (r *run) checkIdentityDue(ctx context.Context, now time.Time) error {
	if r.deps.Identities == nil || now.Sub(r.identityChecked) < r.listEvery() {
		return nil
	}
	r.identityChecked = now
	return r.checkIdentity(ctx, "by the periodic catalog check", slices.Collect(maps.Keys(r.tables)))
}

// checkIdentity compares the catalog's view of tables with their records and makes each table
// that changed react (reactToIdentity), then records what it reacted to. A failed catalog read
// is logged and tried again at the next check: nothing of the table is confirmed past what it
// holds meanwhile.
func (r *run) checkIdentity(ctx context.Context, where string, tables []batch.TableName) error {
	cat, ok := r.fetcher.(IdentityCatalog)
	if !ok || r.deps.Identities == nil {
		return nil
	}
	slices.SortFunc(tables, func(a, b batch.TableName) int { return strings.Compare(a.String(), b.String()) })
	id, err := cat.Identity(ctx, r.cfg.Publication, tables)
	if err != nil {
		r.log.Warn("reading the tables' identity from the catalog; trying again at the next check", logkey.Error, err)
		return nil
	}
	since := batch.Position{LSN: id.At}
	where = fmt.Sprintf("%s (catalog read at WAL position %s)", where, since)
	for _, name := range tables {
		now, ok := id.Tables[name]
		t, known := r.tables[name]
		if !ok || !known {
			continue
		}
		rec, recorded := r.identities[name]
		fresh := identityRecord{RelID: now.RelID, Member: now.Member, Publication: id.Publication, Since: since}
		if !recorded {
			if err := r.putIdentity(ctx, name, fresh); err != nil {
				return err
			}
			continue
		}
		errType, what := identityChange(name, r.cfg.Publication, rec, now, id.Publication)
		if errType == "" {
			continue
		}
		if now.RelID != 0 && now.Member == "" {
			if fresh.Member, err = r.republish(ctx, name); err == nil && fresh.Member != "" {
				what += " (the reader added it back)"
			}
		}
		if err := r.reactToIdentity(ctx, t, errType, what, where, now.RelID == 0); err != nil {
			return err
		}
		if err := r.putIdentity(ctx, name, fresh); err != nil {
			return err
		}
	}
	return nil
}

// republish adds the configured tables the publication lacks back to it (as the pipeline's
// setup does at its next run) and returns table's membership marker afterwards ("" when it is
// still out). A failure is logged: the stop's message says the table is out.
func (r *run) republish(ctx context.Context, table batch.TableName) (string, error) {
	if r.deps.Republish == nil {
		return "", nil
	}
	added, err := r.deps.Republish(ctx)
	if err != nil {
		r.log.Warn("adding a table that left the publication back to it; the pipeline's next setup tries again", logkey.Table, table.String(), logkey.Error, err)
		return "", err
	}
	for _, a := range added {
		r.log.Warn("added a table that had left the publication back to it: its changes resume streaming", logkey.Table, a.String())
	}
	id, err := r.fetcher.(IdentityCatalog).Identity(ctx, r.cfg.Publication, []batch.TableName{table})
	if err != nil {
		return "", err
	}
	return id.Tables[table].Member, nil
}

// relationIdentity checks table e.Table at its RELATION: the relation ID it carries is the
// table's OID as of the WAL, exact; the rest is read from the catalog.
func (r *run) relationIdentity(ctx context.Context, e *source.RelationEvent) error {
	t, ok := r.tables[e.Table]
	if r.deps.Identities == nil || !ok {
		return nil
	}
	where := fmt.Sprintf("at its RELATION at %s", e.Pos)
	rec, recorded := r.identities[e.Table]
	if !recorded || e.RelationID == rec.RelID || e.Pos.Less(rec.Since) {
		// The same table, or a RELATION from WAL older than the record (already handled): the
		// catalog may still say what the WAL cannot (the publication's flags, its membership).
		return r.checkIdentity(ctx, where, []batch.TableName{e.Table})
	}
	what := fmt.Sprintf("dropped and re-created (relation OID %d → %d)", rec.RelID, e.RelationID)
	if err := r.reactToIdentity(ctx, t, failure.TableRecreated, what, where, false); err != nil {
		return err
	}
	next := identityRecord{RelID: e.RelationID, Member: rec.Member, Publication: rec.Publication, Since: e.Pos}
	if cat, ok := r.fetcher.(IdentityCatalog); ok {
		if id, err := cat.Identity(ctx, r.cfg.Publication, []batch.TableName{e.Table}); err == nil {
			if now := id.Tables[e.Table]; now.RelID == e.RelationID {
				next.Member, next.Publication = now.Member, id.Publication
			}
		}
	}
	return r.putIdentity(ctx, e.Table, next)
}

// reactToIdentity makes table t react to an identity change (what, of type errType, seen
// where) as tables[].on_recreate says: a stop, or a resync as after a TRUNCATE (what the table
// buffered is staged and signalled first). A dropped table always stops: there is nothing to
// resync from.
func (r *run) reactToIdentity(ctx context.Context, t *table, errType, what, where string, dropped bool) error {
	name := t.schema.Table
	if dropped || r.cfg.OnRecreate[name] != RecreateResync {
		msg := identityStopMessage(name, what, where, dropped)
		r.log.Error("the table is no longer the one its sink corresponds to, or the publication missed its changes: stopping the table "+
			"(tables[].on_recreate: stop)", logkey.Table, name.String(), logkey.Change, what, logkey.Reason, where)
		stopper, ok := r.deps.Tables.(TableStopper)
		if !ok {
			return failure.New(failure.SourceSetup, msg, nil)
		}
		if err := stopper.Stop(ctx, t.schema, errType, msg, ""); err != nil {
			return fmt.Errorf("stopping table %s (%s): %w", name, what, err)
		}
		return nil
	}
	if err := r.flush(ctx, t); err != nil {
		return err
	}
	if err := r.signal(ctx, t); err != nil {
		return err
	}
	r.log.Warn("the table is no longer the one its sink corresponds to, or the publication missed its changes: resyncing it from a "+
		"new snapshot (tables[].on_recreate: resync)", logkey.Table, name.String(), logkey.Change, what, logkey.Reason, where)
	if err := r.deps.Tables.Resync(ctx, t.schema); err != nil {
		return fmt.Errorf("asking table %s to resync (%s): %w", name, what, err)
	}
	r.resyncing(ctx, name, what)
	return nil
}
