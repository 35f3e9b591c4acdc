package source

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
)

// columnResolver builds the batch.Column of column name of relation rel, of type oid with
// typmod, from the catalog (type name, domain base type, category, array element, declared array
// dimensions). Key and NotNull are left unset.
type columnResolver func(ctx context.Context, rel uint32, name string, oid uint32, typmod int32) (batch.Column, error)

// relation is the decoder's view of one relation ID: the schema its tuples follow.
type relation struct {
	schema   batch.Schema
	identity uint8 // replica identity: d, n, f or i
	keys     []int // positions of the key columns in schema.Columns
	raw      []pglogrepl.RelationMessageColumn
	attnums  map[string]int16 // the columns' attnums when described (nil: not read), to tell a rename
}

// decoder turns pgoutput messages (protocol version 1) into events. It keeps the relation cache
// and the position within the open transaction. It is not safe for concurrent use.
type decoder struct {
	resolve columnResolver
	// attrs reads a relation's pg_attribute rows (nil: not read; every same-place, same-type
	// pair of a dropped and an added column is then taken as a rename).
	attrs func(ctx context.Context, rel uint32) ([]catalogAttr, error)
	// recorded are the attnums of the known tables' columns, recorded with their schemas (nil
	// for a table without a record): at a table's first RELATION they are what renames
	// compares the catalog with, as the attnums read at the previous RELATION are later on.
	recorded map[batch.TableName]map[string]int16
	known    map[batch.TableName]batch.Schema
	oids     map[uint32]batch.TableName // relation OIDs of known tables, to recognize a renamed one
	only     bool                       // drop changes of tables not in known (set for a FOR ALL TABLES publication)
	rels     map[uint32]*relation
	ignored  map[uint32]batch.TableName
	// pending holds the RELATION of a table not known (FOR TABLE publication) until a change of
	// it arrives: with publish_via_partition_root pgoutput describes a partition after its
	// root's RELATION, but its changes arrive as the root's, so the partition's is never used.
	pending map[uint32]*pglogrepl.RelationMessage
	log     *slog.Logger

	inTxn bool
	lsn   uint64
	ts    time.Time
	seq   uint32
}

func newDecoder(resolve columnResolver, schemas []batch.Schema, log *slog.Logger) *decoder {
	d := &decoder{
		resolve: resolve,
		known:   make(map[batch.TableName]batch.Schema, len(schemas)),
		oids:    map[uint32]batch.TableName{},
		rels:    map[uint32]*relation{},
		ignored: map[uint32]batch.TableName{},
		pending: map[uint32]*pglogrepl.RelationMessage{},
		log:     log,
	}
	for _, s := range schemas {
		d.known[s.Table] = s
	}
	return d
}

// next returns the position of the next event of the open transaction. Sequences start at 1, so
// that every stream position of a transaction committing at a snapshot's LSN S sorts after the
// snapshot's rows at (S, 0).
func (d *decoder) next() batch.Position {
	d.seq++
	return batch.Position{LSN: d.lsn, Seq: d.seq}
}

// decode decodes one pgoutput message and passes the events it yields to emit, in order.
func (d *decoder) decode(ctx context.Context, msg pglogrepl.Message, emit func(Event) error) error {
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		if d.inTxn {
			return fmt.Errorf("decoding pgoutput: BEGIN of %s inside the transaction of %s", m.FinalLSN, pglogrepl.LSN(d.lsn))
		}
		d.inTxn, d.lsn, d.ts, d.seq = true, uint64(m.FinalLSN), m.CommitTime, 0
		return emit(&BeginEvent{LSN: d.lsn, CommitTS: d.ts, Xid: m.Xid})
	case *pglogrepl.CommitMessage:
		if !d.inTxn {
			return fmt.Errorf("decoding pgoutput: COMMIT of %s outside a transaction", m.CommitLSN)
		}
		if uint64(m.CommitLSN) != d.lsn {
			return fmt.Errorf("decoding pgoutput: COMMIT at %s ends the transaction begun for %s", m.CommitLSN, pglogrepl.LSN(d.lsn))
		}
		d.inTxn = false
		return emit(&CommitEvent{LSN: d.lsn, EndLSN: uint64(m.TransactionEndLSN), CommitTS: m.CommitTime})
	case *pglogrepl.RelationMessage:
		return d.relation(ctx, m, emit)
	case *pglogrepl.InsertMessage:
		return d.change(ctx, m.RelationID, emit, func(r *relation) (batch.Change, error) { return d.insert(r, m) })
	case *pglogrepl.UpdateMessage:
		return d.change(ctx, m.RelationID, emit, func(r *relation) (batch.Change, error) { return d.update(r, m) })
	case *pglogrepl.DeleteMessage:
		return d.change(ctx, m.RelationID, emit, func(r *relation) (batch.Change, error) { return d.delete(r, m) })
	case *pglogrepl.TruncateMessage:
		return d.truncate(ctx, m, emit)
	case *pglogrepl.TypeMessage, *pglogrepl.OriginMessage, *pglogrepl.LogicalDecodingMessage:
		return nil
	default:
		return fmt.Errorf("decoding pgoutput: unexpected %s message (streaming of in-progress transactions is not requested)", msg.Type())
	}
}

// change decodes one row change of relation id with build and emits it.
func (d *decoder) change(ctx context.Context, id uint32, emit func(Event) error, build func(*relation) (batch.Change, error)) error {
	if !d.inTxn {
		return fmt.Errorf("decoding pgoutput: row change of relation %d outside a transaction", id)
	}
	if err := d.usePending(ctx, id, emit); err != nil {
		return err
	}
	r, ok := d.rels[id]
	if !ok {
		if _, skip := d.ignored[id]; skip {
			return nil
		}
		return fmt.Errorf("decoding pgoutput: row change of relation %d before its RELATION message", id)
	}
	c, err := build(r)
	if err != nil {
		return err
	}
	c.Pos, c.CommitTS = d.next(), d.ts
	return emit(&ChangeEvent{Table: r.schema.Table, Change: c})
}

func (d *decoder) insert(r *relation, m *pglogrepl.InsertMessage) (batch.Change, error) {
	vals, err := tupleValues(r, m.Tuple)
	if err != nil {
		return batch.Change{}, err
	}
	if err := checkKeyPresent(r, vals, "new"); err != nil {
		return batch.Change{}, err
	}
	return batch.Change{Op: batch.OpInsert, Values: vals}, nil
}

// update decodes an update. Unchanged TOAST values are taken from the old tuple when it carries
// them (REPLICA IDENTITY FULL); otherwise they stay Unchanged for the buffer or the Fetcher to
// fill. OldKey is set when a key column's value differs between the old and the new tuple.
func (d *decoder) update(r *relation, m *pglogrepl.UpdateMessage) (batch.Change, error) {
	vals, err := tupleValues(r, m.NewTuple)
	if err != nil {
		return batch.Change{}, err
	}
	c := batch.Change{Op: batch.OpUpdate, Values: vals}
	if m.OldTuple == nil {
		return c, checkKeyPresent(r, vals, "new")
	}
	old, err := tupleValues(r, m.OldTuple)
	if err != nil {
		return batch.Change{}, err
	}
	for i := range vals {
		if vals[i].Unchanged && hasText(old[i]) {
			vals[i] = old[i]
		}
	}
	if err := checkKeyPresent(r, vals, "new"); err != nil {
		return batch.Change{}, err
	}
	if err := checkKeyPresent(r, old, "old"); err != nil {
		return batch.Change{}, err
	}
	for _, k := range r.keys {
		if !bytes.Equal(old[k].Text, vals[k].Text) {
			c.OldKey = keyValues(old, r.keys)
			break
		}
	}
	return c, nil
}

func (d *decoder) delete(r *relation, m *pglogrepl.DeleteMessage) (batch.Change, error) {
	if m.OldTuple == nil {
		return batch.Change{}, failure.Permanentf("table %s: a delete arrived without its key (replica identity NOTHING): ALTER TABLE %s REPLICA IDENTITY DEFAULT or FULL",
			r.schema.Table, quoteTable(r.schema.Table))
	}
	old, err := tupleValues(r, m.OldTuple)
	if err != nil {
		return batch.Change{}, err
	}
	if err := checkKeyPresent(r, old, "old"); err != nil {
		return batch.Change{}, err
	}
	return batch.Change{Op: batch.OpDelete, Values: keyValues(old, r.keys)}, nil
}

func (d *decoder) truncate(ctx context.Context, m *pglogrepl.TruncateMessage, emit func(Event) error) error {
	if !d.inTxn {
		return fmt.Errorf("decoding pgoutput: TRUNCATE outside a transaction")
	}
	for _, id := range m.RelationIDs {
		if err := d.usePending(ctx, id, emit); err != nil {
			return err
		}
		r, ok := d.rels[id]
		if !ok {
			if _, skip := d.ignored[id]; skip {
				continue
			}
			return fmt.Errorf("decoding pgoutput: TRUNCATE of relation %d before its RELATION message", id)
		}
		ev := &TruncateEvent{Table: r.schema.Table, Pos: d.next(), CommitTS: d.ts,
			Cascade:         m.Option&pglogrepl.TruncateOptionCascade != 0,
			RestartIdentity: m.Option&pglogrepl.TruncateOptionRestartIdentity != 0}
		if err := emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// hasText reports whether v carries a value (neither NULL nor an unchanged TOAST value).
func hasText(v batch.Value) bool { return !v.Null && !v.Unchanged }

// checkKeyPresent fails when a key column of a tuple has no value: without it the row cannot be
// addressed in the destination.
func checkKeyPresent(r *relation, vals []batch.Value, which string) error {
	if len(r.keys) == 0 {
		return failure.Permanentf("table %s has no key columns (a schema change dropped them?): restore the key or resync the table", r.schema.Table)
	}
	for _, k := range r.keys {
		if hasText(vals[k]) {
			continue
		}
		col := r.schema.Columns[k].Name
		if vals[k].Unchanged {
			return failure.Permanentf("table %s: key column %s arrived as an unchanged TOAST value without an old tuple to take it from: ALTER TABLE %s REPLICA IDENTITY FULL",
				r.schema.Table, col, quoteTable(r.schema.Table))
		}
		return failure.Permanentf("table %s: the %s tuple has no value for key column %s; the replica identity must carry the key: ALTER TABLE %s REPLICA IDENTITY FULL",
			r.schema.Table, which, col, quoteTable(r.schema.Table))
	}
	return nil
}

// tupleValues converts a pgoutput tuple to values in schema order.
func tupleValues(r *relation, t *pglogrepl.TupleData) ([]batch.Value, error) {
	if t == nil {
		return nil, fmt.Errorf("table %s: decoding pgoutput: missing tuple", r.schema.Table)
	}
	if len(t.Columns) != len(r.schema.Columns) {
		return nil, fmt.Errorf("table %s: decoding pgoutput: tuple has %d columns, the relation %d",
			r.schema.Table, len(t.Columns), len(r.schema.Columns))
	}
	vals := make([]batch.Value, len(t.Columns))
	for i, c := range t.Columns {
		switch c.DataType {
		case pglogrepl.TupleDataTypeText:
			vals[i].Text = c.Data
		case pglogrepl.TupleDataTypeNull:
			vals[i].Null = true
		case pglogrepl.TupleDataTypeToast:
			vals[i].Unchanged = true
		default:
			return nil, fmt.Errorf("table %s: column %s: decoding pgoutput: unexpected tuple data type %q (binary mode is not requested)",
				r.schema.Table, r.schema.Columns[i].Name, c.DataType)
		}
	}
	return vals, nil
}

// relation handles a RELATION message: it updates the cache and emits a SchemaEvent when the
// columns differ from what was known (or the table was unknown).
func (d *decoder) relation(ctx context.Context, m *pglogrepl.RelationMessage, emit func(Event) error) error {
	name := batch.TableName{Schema: m.Namespace, Name: m.RelationName}
	prev := d.rels[m.RelationID]
	if _, known := d.known[name]; known || prev != nil {
		if err := emit(&RelationEvent{Table: name, RelationID: m.RelationID, Pos: batch.Position{LSN: d.lsn, Seq: d.seq}}); err != nil {
			return err
		}
	}
	same := prev != nil && prev.schema.Table == name && sameRaw(prev.raw, m.Columns)
	if same && prev.attnums != nil && d.attrs != nil {
		attrs, err := d.attrs(ctx, m.RelationID)
		if err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		same = len(reAdded(prev.schema, prev.attnums, attnums(attrs), nil)) == 0
	}
	if same {
		lost := identityLost(m, prev.schema, prev.identity)
		prev.identity = m.ReplicaIdentity
		if lost == "" {
			return nil
		}
		if !d.inTxn {
			return fmt.Errorf("decoding pgoutput: RELATION %s outside a transaction", name)
		}
		old := prev.schema
		return emit(&SchemaEvent{Table: name, Pos: d.next(), Old: &old, New: prev.schema, Identity: lost})
	}
	var old *batch.Schema
	if prev != nil {
		old = &prev.schema
	} else if s, ok := d.known[name]; ok {
		old = &s
	} else if was, ok := d.oids[m.RelationID]; ok {
		s := d.known[was] // renamed while the reader was not running
		old = &s
	}
	if old == nil && d.only {
		if _, seen := d.ignored[m.RelationID]; !seen {
			d.log.Info("ignoring changes of a table the pipeline does not replicate", slog.String(logTable, name.String()))
		}
		d.ignored[m.RelationID] = name
		return nil
	}
	delete(d.pending, m.RelationID)
	if old == nil {
		d.pending[m.RelationID] = m
		return nil
	}
	return d.describe(ctx, m, old, emit)
}

// usePending describes relation id from its held RELATION message when a change of it arrives.
func (d *decoder) usePending(ctx context.Context, id uint32, emit func(Event) error) error {
	m, ok := d.pending[id]
	if !ok {
		return nil
	}
	delete(d.pending, id)
	return d.describe(ctx, m, nil, emit)
}

// describe caches the relation of m, whose columns were known as old (nil: a table not known),
// and emits a SchemaEvent when they differ (or the table was unknown).
func (d *decoder) describe(ctx context.Context, m *pglogrepl.RelationMessage, old *batch.Schema, emit func(Event) error) error {
	name := batch.TableName{Schema: m.Namespace, Name: m.RelationName}
	ev, err := d.diff(ctx, m, name, old)
	if err != nil {
		return err
	}
	var attrs []catalogAttr
	if d.attrs != nil {
		if attrs, err = d.attrs(ctx, m.RelationID); err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
	}
	var was map[string]int16
	var wasIdentity uint8
	if prev := d.rels[m.RelationID]; prev != nil {
		was, wasIdentity = prev.attnums, prev.identity
	} else if old != nil {
		was = d.recorded[old.Table]
	}
	ev.Identity = identityLost(m, ev.New, wasIdentity)
	ev.RenamedColumns = renames(ev, was, attrs)
	if old != nil && was != nil && d.attrs != nil {
		// A column dropped and added again under the same name and type leaves the RELATION as
		// it was: only its attnum tells. Its old values are gone from the source (NULL, or the
		// new column's default, in every row), so it is a drop and an add.
		for _, c := range reAdded(ev.New, was, attnums(attrs), ev.Added) {
			ev.Dropped, ev.Added = append(ev.Dropped, c), append(ev.Added, c)
		}
	}
	r := &relation{schema: ev.New, identity: m.ReplicaIdentity, keys: ev.New.KeyIndexes()}
	if d.attrs != nil {
		r.attnums = attnums(attrs)
		ev.Attnums = columnAttnums(r.attnums, ev.New)
	}
	for _, c := range m.Columns {
		r.raw = append(r.raw, *c)
	}
	d.rels[m.RelationID] = r
	delete(d.ignored, m.RelationID)
	if old != nil && !ev.Renamed && len(ev.Added)+len(ev.Dropped)+len(ev.Retyped)+len(ev.RenamedColumns) == 0 && ev.Identity == "" {
		return nil
	}
	if !d.inTxn {
		return fmt.Errorf("decoding pgoutput: RELATION %s outside a transaction", name)
	}
	ev.Pos = d.next()
	return emit(ev)
}

// diff builds the schema of relation message m and compares it with old (nil when unknown).
// Columns that did not change keep what old knew of them (NOT NULL, key). Added columns are
// nullable and not part of the key. A table unknown so far takes its key from the replica
// identity flags (unless the identity is FULL, which flags every column).
func (d *decoder) diff(ctx context.Context, m *pglogrepl.RelationMessage, name batch.TableName, old *batch.Schema) (*SchemaEvent, error) {
	ev := &SchemaEvent{Table: name, Old: old, New: batch.Schema{Table: name}}
	if old != nil && old.Table != name {
		ev.Renamed = true
	}
	for _, mc := range m.Columns {
		c, err := d.resolve(ctx, m.RelationID, mc.Name, mc.DataType, mc.TypeModifier)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", name, err)
		}
		var oc *batch.Column
		if old != nil {
			if i := slices.IndexFunc(old.Columns, func(o batch.Column) bool { return o.Name == mc.Name }); i >= 0 {
				oc = &old.Columns[i]
			}
		}
		switch {
		case oc == nil && old != nil:
			ev.Added = append(ev.Added, mc.Name)
		case oc == nil:
			c.Key = mc.Flags&1 != 0 && m.ReplicaIdentity != 'f'
		case oc.TypeOID != c.TypeOID || oc.TypeMod != c.TypeMod || oc.TypeName != c.TypeName:
			ev.Retyped = append(ev.Retyped, mc.Name)
			c.Key, c.NotNull = oc.Key, oc.NotNull
		default:
			c = *oc
		}
		ev.New.Columns = append(ev.New.Columns, c)
	}
	if old != nil {
		for _, oc := range old.Columns {
			if !slices.ContainsFunc(m.Columns, func(mc *pglogrepl.RelationMessageColumn) bool { return mc.Name == oc.Name }) {
				ev.Dropped = append(ev.Dropped, oc.Name)
			}
		}
	}
	return ev, nil
}

// identityLost describes how the replica identity of relation message m leaves out a key column
// of schema ("" when it does not): an identity of some columns (DEFAULT on a primary key, or
// USING INDEX) none of which is the key, so a DELETE would carry columns Sluice cannot delete
// by. It is judged whenever the identity differs from was (0 at a run's first RELATION, so a
// change made while the pipeline was stopped is seen too). NOTHING, or DEFAULT without a primary
// key, flags no column: Postgres then refuses UPDATE and DELETE on the table while the
// publication publishes them, so nothing can diverge; FULL carries every column.
func identityLost(m *pglogrepl.RelationMessage, schema batch.Schema, was uint8) string {
	if m.ReplicaIdentity == was || (m.ReplicaIdentity != 'd' && m.ReplicaIdentity != 'i') {
		return ""
	}
	if !slices.ContainsFunc(m.Columns, func(mc *pglogrepl.RelationMessageColumn) bool { return mc.Flags&1 != 0 }) {
		return ""
	}
	kind := "DEFAULT"
	if m.ReplicaIdentity == 'i' {
		kind = "USING INDEX"
	}
	for _, c := range schema.Columns {
		if !c.Key {
			continue
		}
		i := slices.IndexFunc(m.Columns, func(mc *pglogrepl.RelationMessageColumn) bool { return mc.Name == c.Name })
		if i < 0 || m.Columns[i].Flags&1 == 0 {
			return fmt.Sprintf("replica identity %s, which does not carry key column %s", kind, c.Name)
		}
	}
	return ""
}

// sameRaw reports whether a RELATION message describes the same columns as before.
func sameRaw(prev []pglogrepl.RelationMessageColumn, cols []*pglogrepl.RelationMessageColumn) bool {
	if len(prev) != len(cols) {
		return false
	}
	for i, c := range cols {
		if prev[i].Name != c.Name || prev[i].DataType != c.DataType || prev[i].TypeModifier != c.TypeModifier {
			return false
		}
	}
	return true
}
