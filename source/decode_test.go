package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/sluicecdc/sluice/batch"
)

var testTable = batch.TableName{Schema: "public", Name: "t"}

// fakeResolve resolves types without a catalog: built-in OIDs map to themselves, 90000 is a
// domain over int4.
func fakeResolve(_ context.Context, _ uint32, name string, oid uint32, typmod int32) (batch.Column, error) {
	names := map[uint32]string{23: "integer", 25: "text", 20: "bigint", 90000: "posint"}
	n, ok := names[oid]
	if !ok {
		return batch.Column{}, errors.New("unknown type")
	}
	base := oid
	if oid == 90000 {
		base = 23
	}
	return batch.Column{Name: name, TypeOID: base, TypeName: n, TypeMod: typmod, Category: "N"}, nil
}

func relMsg(id uint32, identity uint8, cols ...pglogrepl.RelationMessageColumn) *pglogrepl.RelationMessage {
	m := &pglogrepl.RelationMessage{RelationID: id, Namespace: "public", RelationName: "t", ReplicaIdentity: identity}
	for i := range cols {
		m.Columns = append(m.Columns, &cols[i])
	}
	m.ColumnNum = uint16(len(cols))
	return m
}

func col(name string, oid uint32, key bool) pglogrepl.RelationMessageColumn {
	var flags uint8
	if key {
		flags = 1
	}
	return pglogrepl.RelationMessageColumn{Flags: flags, Name: name, DataType: oid, TypeModifier: -1}
}

// tuple builds tuple data: "n" is NULL, "u" unchanged TOAST, anything else text.
func tuple(vals ...string) *pglogrepl.TupleData {
	t := &pglogrepl.TupleData{ColumnNum: uint16(len(vals))}
	for _, v := range vals {
		switch v {
		case "n":
			t.Columns = append(t.Columns, &pglogrepl.TupleDataColumn{DataType: 'n'})
		case "u":
			t.Columns = append(t.Columns, &pglogrepl.TupleDataColumn{DataType: 'u'})
		default:
			t.Columns = append(t.Columns, &pglogrepl.TupleDataColumn{DataType: 't', Data: []byte(v)})
		}
	}
	return t
}

func knownSchema() batch.Schema {
	return batch.Schema{Table: testTable, Columns: []batch.Column{
		{Name: "id", TypeOID: 23, TypeName: "integer", TypeMod: -1, NotNull: true, Key: true, Category: "N"},
		{Name: "doc", TypeOID: 25, TypeName: "text", TypeMod: -1, Category: "N"},
	}}
}

// run decodes msgs and returns the events.
// run decodes msgs and returns the events, RelationEvents left out (relationEvents keeps them).
func run(t *testing.T, d *decoder, msgs ...pglogrepl.Message) ([]Event, error) {
	t.Helper()
	evs, err := relationEvents(t, d, msgs...)
	return slices.DeleteFunc(evs, func(ev Event) bool { _, rel := ev.(*RelationEvent); return rel }), err
}

// relationEvents decodes msgs and returns every event.
func relationEvents(t *testing.T, d *decoder, msgs ...pglogrepl.Message) ([]Event, error) {
	t.Helper()
	var evs []Event
	for _, m := range msgs {
		if err := d.decode(context.Background(), m, func(ev Event) error { evs = append(evs, ev); return nil }); err != nil {
			return evs, err
		}
	}
	return evs, nil
}

func vals(vs []batch.Value) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		switch {
		case v.Null:
			out[i] = "n"
		case v.Unchanged:
			out[i] = "u"
		default:
			out[i] = string(v.Text)
		}
	}
	return out
}

func TestDecodeChanges(t *testing.T) {
	t.Parallel()
	begin := &pglogrepl.BeginMessage{FinalLSN: 1000, CommitTime: time.Unix(100, 0), Xid: 7}
	commit := &pglogrepl.CommitMessage{CommitLSN: 1000, TransactionEndLSN: 1050, CommitTime: time.Unix(100, 0)}
	tests := []struct {
		name     string
		identity uint8
		msg      pglogrepl.Message
		wantOp   batch.Op
		want     []string
		wantOld  []string
		wantErr  bool
	}{
		{name: "insert", identity: 'd', msg: &pglogrepl.InsertMessage{RelationID: 1, Tuple: tuple("1", "a")},
			wantOp: batch.OpInsert, want: []string{"1", "a"}},
		{name: "update keeps unchanged toast without old tuple", identity: 'd',
			msg:    &pglogrepl.UpdateMessage{RelationID: 1, NewTuple: tuple("1", "u")},
			wantOp: batch.OpUpdate, want: []string{"1", "u"}},
		{name: "update under FULL takes toast from old tuple", identity: 'f',
			msg:    &pglogrepl.UpdateMessage{RelationID: 1, OldTupleType: 'O', OldTuple: tuple("1", "big"), NewTuple: tuple("1", "u")},
			wantOp: batch.OpUpdate, want: []string{"1", "big"}},
		{name: "key change with K tuple gives OldKey", identity: 'd',
			msg:    &pglogrepl.UpdateMessage{RelationID: 1, OldTupleType: 'K', OldTuple: tuple("1", "n"), NewTuple: tuple("2", "x")},
			wantOp: batch.OpUpdate, want: []string{"2", "x"}, wantOld: []string{"1", "n"}},
		{name: "key change under FULL keeps only the key in OldKey", identity: 'f',
			msg:    &pglogrepl.UpdateMessage{RelationID: 1, OldTupleType: 'O', OldTuple: tuple("1", "old"), NewTuple: tuple("2", "u")},
			wantOp: batch.OpUpdate, want: []string{"2", "old"}, wantOld: []string{"1", "n"}},
		{name: "K tuple without key change gives no OldKey", identity: 'd',
			msg:    &pglogrepl.UpdateMessage{RelationID: 1, OldTupleType: 'K', OldTuple: tuple("1", "n"), NewTuple: tuple("1", "y")},
			wantOp: batch.OpUpdate, want: []string{"1", "y"}},
		{name: "delete keeps only the key", identity: 'f',
			msg:    &pglogrepl.DeleteMessage{RelationID: 1, OldTupleType: 'O', OldTuple: tuple("3", "gone")},
			wantOp: batch.OpDelete, want: []string{"3", "n"}},
		{name: "delete without old tuple is an error", identity: 'n',
			msg: &pglogrepl.DeleteMessage{RelationID: 1}, wantErr: true},
		{name: "unchanged key is an error", identity: 'd',
			msg: &pglogrepl.UpdateMessage{RelationID: 1, NewTuple: tuple("u", "x")}, wantErr: true},
		{name: "tuple of the wrong width is an error", identity: 'd',
			msg: &pglogrepl.InsertMessage{RelationID: 1, Tuple: tuple("1")}, wantErr: true},
		{name: "change of an unknown relation is an error", identity: 'd',
			msg: &pglogrepl.InsertMessage{RelationID: 9, Tuple: tuple("1", "a")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDecoder(fakeResolve, []batch.Schema{knownSchema()}, slog.New(slog.DiscardHandler))
			rel := relMsg(1, tt.identity, col("id", 23, true), col("doc", 25, tt.identity == 'f'))
			evs, err := run(t, d, begin, rel, tt.msg, commit)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want an error, got events %v", evs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 3 {
				t.Fatalf("want begin, change, commit; got %d events", len(evs))
			}
			ce, ok := evs[1].(*ChangeEvent)
			if !ok {
				t.Fatalf("event 1 is %T", evs[1])
			}
			c := ce.Change
			if c.Op != tt.wantOp || ce.Table != testTable {
				t.Errorf("op %s table %s, want %s %s", c.Op, ce.Table, tt.wantOp, testTable)
			}
			if c.Pos != (batch.Position{LSN: 1000, Seq: 1}) || !c.CommitTS.Equal(time.Unix(100, 0)) {
				t.Errorf("pos %s ts %s, want 0/3E8:1 at 100s", c.Pos, c.CommitTS)
			}
			if got := vals(c.Values); !slices.Equal(got, tt.want) {
				t.Errorf("values %v, want %v", got, tt.want)
			}
			if got := vals(c.OldKey); !slices.Equal(got, tt.wantOld) && !(len(got) == 0 && len(tt.wantOld) == 0) {
				t.Errorf("old key %v, want %v", got, tt.wantOld)
			}
			if ce := evs[2].(*CommitEvent); ce.LSN != 1000 || ce.EndLSN != 1050 {
				t.Errorf("commit %+v", ce)
			}
		})
	}
}

func TestDecodeSequenceAndTruncate(t *testing.T) {
	t.Parallel()
	d := newDecoder(fakeResolve, []batch.Schema{knownSchema()}, slog.New(slog.DiscardHandler))
	evs, err := run(t, d,
		&pglogrepl.BeginMessage{FinalLSN: 500},
		relMsg(1, 'd', col("id", 23, true), col("doc", 25, false)),
		&pglogrepl.InsertMessage{RelationID: 1, Tuple: tuple("1", "a")},
		&pglogrepl.TruncateMessage{RelationNum: 1, Option: pglogrepl.TruncateOptionRestartIdentity, RelationIDs: []uint32{1}},
		&pglogrepl.InsertMessage{RelationID: 1, Tuple: tuple("2", "b")},
		&pglogrepl.CommitMessage{CommitLSN: 500, TransactionEndLSN: 600},
		&pglogrepl.BeginMessage{FinalLSN: 700},
		&pglogrepl.InsertMessage{RelationID: 1, Tuple: tuple("3", "c")},
		&pglogrepl.CommitMessage{CommitLSN: 700, TransactionEndLSN: 800},
	)
	if err != nil {
		t.Fatal(err)
	}
	var got []batch.Position
	for _, ev := range evs {
		switch e := ev.(type) {
		case *ChangeEvent:
			got = append(got, e.Change.Pos)
		case *TruncateEvent:
			if !e.RestartIdentity || e.Cascade || e.Table != testTable {
				t.Errorf("truncate %+v", e)
			}
			got = append(got, e.Pos)
		case *SchemaEvent:
			t.Errorf("unexpected schema event %+v: the relation matches the known schema", e)
		}
	}
	want := []batch.Position{{LSN: 500, Seq: 1}, {LSN: 500, Seq: 2}, {LSN: 500, Seq: 3}, {LSN: 700, Seq: 1}}
	if !slices.Equal(got, want) {
		t.Errorf("positions %v, want %v", got, want)
	}
}

func TestDecodeSchemaChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                    string
		cols                    []pglogrepl.RelationMessageColumn
		relName                 string
		wantEvent               bool
		added, dropped, retyped []string
		wantKey                 []bool
	}{
		{name: "same as known", cols: []pglogrepl.RelationMessageColumn{col("id", 23, true), col("doc", 25, false)}},
		{name: "added column", cols: []pglogrepl.RelationMessageColumn{col("id", 23, true), col("doc", 25, false), col("n", 20, false)},
			wantEvent: true, added: []string{"n"}, wantKey: []bool{true, false, false}},
		{name: "dropped column", cols: []pglogrepl.RelationMessageColumn{col("id", 23, true)},
			wantEvent: true, dropped: []string{"doc"}, wantKey: []bool{true}},
		{name: "type change", cols: []pglogrepl.RelationMessageColumn{col("id", 20, true), col("doc", 25, false)},
			wantEvent: true, retyped: []string{"id"}, wantKey: []bool{true, false}},
		{name: "domain over the same base is a change of name", cols: []pglogrepl.RelationMessageColumn{col("id", 90000, true), col("doc", 25, false)},
			wantEvent: true, retyped: []string{"id"}, wantKey: []bool{true, false}},
		{name: "renamed table", relName: "t2", cols: []pglogrepl.RelationMessageColumn{col("id", 23, true), col("doc", 25, false)},
			wantEvent: true, wantKey: []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDecoder(fakeResolve, []batch.Schema{knownSchema()}, slog.New(slog.DiscardHandler))
			first := relMsg(1, 'd', col("id", 23, true), col("doc", 25, false))
			second := relMsg(1, 'd', tt.cols...)
			if tt.relName != "" {
				second.RelationName = tt.relName
			}
			evs, err := run(t, d, &pglogrepl.BeginMessage{FinalLSN: 10}, first,
				&pglogrepl.InsertMessage{RelationID: 1, Tuple: tuple("1", "a")}, second)
			if err != nil {
				t.Fatal(err)
			}
			var se *SchemaEvent
			for _, ev := range evs {
				if e, ok := ev.(*SchemaEvent); ok {
					if se != nil {
						t.Fatalf("two schema events")
					}
					se = e
				}
			}
			if !tt.wantEvent {
				if se != nil {
					t.Fatalf("unexpected schema event %+v", se)
				}
				return
			}
			if se == nil {
				t.Fatal("want a schema event")
			}
			if !slices.Equal(se.Added, tt.added) || !slices.Equal(se.Dropped, tt.dropped) || !slices.Equal(se.Retyped, tt.retyped) {
				t.Errorf("added %v dropped %v retyped %v, want %v %v %v", se.Added, se.Dropped, se.Retyped, tt.added, tt.dropped, tt.retyped)
			}
			if se.Renamed != (tt.relName != "") || se.Old == nil || se.Old.Table != testTable {
				t.Errorf("renamed %v old %v", se.Renamed, se.Old)
			}
			var keys []bool
			for _, c := range se.New.Columns {
				keys = append(keys, c.Key)
			}
			if !slices.Equal(keys, tt.wantKey) {
				t.Errorf("key flags %v, want %v", keys, tt.wantKey)
			}
			if se.Pos != (batch.Position{LSN: 10, Seq: 2}) {
				t.Errorf("schema event at %s, want 0/A:2", se.Pos)
			}
			// Later tuples follow the new schema.
			if _, err := run(t, d, &pglogrepl.InsertMessage{RelationID: 1, Tuple: tuple(make([]string, len(tt.cols))...)}); err != nil && len(tt.cols) > 0 {
				t.Errorf("insert after the schema change: %v", err)
			}
		})
	}
}

func TestDecodeUnknownTables(t *testing.T) {
	t.Parallel()
	t.Run("ignored under a FOR ALL TABLES publication", func(t *testing.T) {
		t.Parallel()
		d := newDecoder(fakeResolve, []batch.Schema{knownSchema()}, slog.New(slog.DiscardHandler))
		d.only = true
		other := relMsg(2, 'd', col("id", 23, true))
		other.RelationName = "other"
		evs, err := run(t, d, &pglogrepl.BeginMessage{FinalLSN: 10}, other,
			&pglogrepl.InsertMessage{RelationID: 2, Tuple: tuple("1")},
			&pglogrepl.CommitMessage{CommitLSN: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 {
			t.Errorf("want only begin and commit, got %d events", len(evs))
		}
	})
	t.Run("a known relation OID under a new name is a rename", func(t *testing.T) {
		t.Parallel()
		d := newDecoder(fakeResolve, []batch.Schema{knownSchema()}, slog.New(slog.DiscardHandler))
		d.oids[1] = testTable
		renamed := relMsg(1, 'd', col("id", 23, true), col("doc", 25, false))
		renamed.RelationName = "t_new"
		evs, err := run(t, d, &pglogrepl.BeginMessage{FinalLSN: 10}, renamed,
			&pglogrepl.InsertMessage{RelationID: 1, Tuple: tuple("1", "x")})
		if err != nil {
			t.Fatal(err)
		}
		se, ok := evs[1].(*SchemaEvent)
		if !ok || !se.Renamed || se.Old == nil || se.Old.Table != testTable || se.New.Table.Name != "t_new" {
			t.Fatalf("want a rename event, got %#v", evs[1])
		}
		if len(evs) != 3 {
			t.Errorf("the renamed table's changes must be reported, got %d events", len(evs))
		}
	})
	t.Run("reported with the identity key when no schemas are given", func(t *testing.T) {
		t.Parallel()
		d := newDecoder(fakeResolve, nil, slog.New(slog.DiscardHandler))
		evs, err := run(t, d, &pglogrepl.BeginMessage{FinalLSN: 10},
			relMsg(2, 'd', col("id", 23, true), col("doc", 25, false)),
			&pglogrepl.InsertMessage{RelationID: 2, Tuple: tuple("1", "x")})
		if err != nil {
			t.Fatal(err)
		}
		se, ok := evs[1].(*SchemaEvent)
		if !ok || se.Old != nil || !se.New.Columns[0].Key || se.New.Columns[1].Key {
			t.Fatalf("want a schema event for a new table keyed on id, got %#v", evs[1])
		}
		if _, ok := evs[2].(*ChangeEvent); !ok {
			t.Errorf("event 2 is %T", evs[2])
		}
	})
}

func TestDecodeProtocolErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msgs []pglogrepl.Message
	}{
		{"commit without begin", []pglogrepl.Message{&pglogrepl.CommitMessage{CommitLSN: 1}}},
		{"nested begin", []pglogrepl.Message{&pglogrepl.BeginMessage{FinalLSN: 1}, &pglogrepl.BeginMessage{FinalLSN: 2}}},
		{"commit of another lsn", []pglogrepl.Message{&pglogrepl.BeginMessage{FinalLSN: 1}, &pglogrepl.CommitMessage{CommitLSN: 2}}},
		{"change outside a transaction", []pglogrepl.Message{&pglogrepl.InsertMessage{RelationID: 1, Tuple: tuple("1")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDecoder(fakeResolve, nil, slog.New(slog.DiscardHandler))
			if _, err := run(t, d, tt.msgs...); err == nil {
				t.Error("want an error")
			}
		})
	}
}

// TestDecodeColumnRenames: a column gone and one new at the same place with the same type is a
// rename (key flag kept) unless the catalog shows the new one added after a drop.
func TestDecodeColumnRenames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cols    []pglogrepl.RelationMessageColumn
		attrs   []catalogAttr
		renamed []ColumnRename
		added   []string
	}{
		{name: "rename, no catalog", cols: []pglogrepl.RelationMessageColumn{col("id", 23, true), col("body", 25, false)},
			renamed: []ColumnRename{{Old: "doc", New: "body"}}},
		{name: "rename of the key", cols: []pglogrepl.RelationMessageColumn{col("ident", 23, true), col("doc", 25, false)},
			attrs:   []catalogAttr{{1, "ident", false}, {2, "doc", false}},
			renamed: []ColumnRename{{Old: "id", New: "ident"}}},
		{name: "rename, catalog keeps the attnum", cols: []pglogrepl.RelationMessageColumn{col("id", 23, true), col("body", 25, false)},
			attrs:   []catalogAttr{{1, "id", false}, {2, "body", false}},
			renamed: []ColumnRename{{Old: "doc", New: "body"}}},
		{name: "drop and add of the same type", cols: []pglogrepl.RelationMessageColumn{col("id", 23, true), col("body", 25, false)},
			attrs: []catalogAttr{{1, "id", false}, {2, "........pg.dropped.2........", true}, {3, "body", false}},
			added: []string{"body"}},
		{name: "another type is no rename", cols: []pglogrepl.RelationMessageColumn{col("id", 23, true), col("n", 20, false)},
			added: []string{"n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDecoder(fakeResolve, []batch.Schema{knownSchema()}, slog.New(slog.DiscardHandler))
			if tt.attrs != nil {
				d.attrs = func(context.Context, uint32) ([]catalogAttr, error) { return tt.attrs, nil }
			}
			evs, err := run(t, d, &pglogrepl.BeginMessage{FinalLSN: 10}, relMsg(1, 'd', tt.cols...))
			if err != nil {
				t.Fatal(err)
			}
			var se *SchemaEvent
			for _, ev := range evs {
				if e, ok := ev.(*SchemaEvent); ok {
					se = e
				}
			}
			if se == nil {
				t.Fatal("want a schema event")
			}
			if !slices.Equal(se.RenamedColumns, tt.renamed) || !slices.Equal(se.Added, tt.added) {
				t.Errorf("renamed %v added %v, want %v %v", se.RenamedColumns, se.Added, tt.renamed, tt.added)
			}
			if !se.New.Columns[0].Key {
				t.Errorf("the first column lost its key flag: %+v", se.New.Columns[0])
			}
		})
	}
}

// TestDecodeRenameAtAFirstRelation: a run's first RELATION of a table is compared with the schema
// the run started from. Its column b was dropped and its last column c renamed to d while no
// reader ran: the catalog then shows d after a dropped slot, as a column dropped and another
// added does. The attnums recorded with the schema tell the two apart (d has c's attnum, or a
// new one); without them the pair reads as a drop and an add, the gap the record closes.
func TestDecodeRenameAtAFirstRelation(t *testing.T) {
	t.Parallel()
	dropped := func(n int16) catalogAttr {
		return catalogAttr{n, fmt.Sprintf("........pg.dropped.%d........", n), true}
	}
	known := batch.Schema{Table: testTable, Columns: []batch.Column{
		{Name: "id", TypeOID: 23, TypeName: "integer", TypeMod: -1, NotNull: true, Key: true, Category: "N"},
		{Name: "b", TypeOID: 25, TypeName: "text", TypeMod: -1, Category: "N"},
		{Name: "c", TypeOID: 25, TypeName: "text", TypeMod: -1, NotNull: true, Category: "N"},
	}}
	recorded := map[string]int16{"id": 1, "b": 2, "c": 3}
	tests := []struct {
		name     string
		recorded map[string]int16
		attrs    []catalogAttr
		renamed  []ColumnRename
		added    []string
		dropped  []string
	}{
		{name: "b dropped, c renamed to d, attnums recorded: a rename", recorded: recorded,
			attrs:   []catalogAttr{{1, "id", false}, dropped(2), {3, "d", false}},
			renamed: []ColumnRename{{Old: "c", New: "d"}}, dropped: []string{"b"}},
		{name: "b and c dropped, d added, attnums recorded: a drop and an add", recorded: recorded,
			attrs: []catalogAttr{{1, "id", false}, dropped(2), dropped(3), {4, "d", false}},
			added: []string{"d"}, dropped: []string{"b", "c"}},
		{name: "c dropped, d added in its place, attnums recorded: a drop and an add", recorded: recorded,
			attrs: []catalogAttr{{1, "id", false}, {2, "b", false}, dropped(3), {4, "d", false}},
			added: []string{"d"}, dropped: []string{"c"}},
		// Without a record (a record written before attnums were kept) the catalog cannot tell.
		{name: "b dropped, c renamed to d, no attnums recorded: read as a drop and an add",
			attrs: []catalogAttr{{1, "id", false}, dropped(2), {3, "d", false}},
			added: []string{"d"}, dropped: []string{"b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDecoder(fakeResolve, []batch.Schema{known}, slog.New(slog.DiscardHandler))
			d.attrs = func(context.Context, uint32) ([]catalogAttr, error) { return tt.attrs, nil }
			if tt.recorded != nil {
				d.recorded = map[batch.TableName]map[string]int16{testTable: tt.recorded}
			}
			cols := []pglogrepl.RelationMessageColumn{col("id", 23, true)}
			if len(tt.dropped) == 1 && tt.dropped[0] == "c" {
				cols = append(cols, col("b", 25, false))
			}
			cols = append(cols, col("d", 25, false))
			evs, err := run(t, d, &pglogrepl.BeginMessage{FinalLSN: 10}, relMsg(1, 'd', cols...))
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 {
				t.Fatalf("want BEGIN and a schema event, got %v", evs)
			}
			se := evs[1].(*SchemaEvent)
			if !slices.Equal(se.RenamedColumns, tt.renamed) || !slices.Equal(se.Added, tt.added) || !slices.Equal(se.Dropped, tt.dropped) {
				t.Errorf("renamed %v added %v dropped %v, want %v %v %v", se.RenamedColumns, se.Added, se.Dropped, tt.renamed, tt.added, tt.dropped)
			}
			// The event carries the attnums a caller records with the new schema.
			want := map[string]int16{}
			for _, a := range tt.attrs {
				if !a.Dropped {
					want[a.Name] = a.Num
				}
			}
			if !maps.Equal(se.Attnums, want) {
				t.Errorf("attnums %v, want %v", se.Attnums, want)
			}
			if len(tt.renamed) > 0 {
				i := slices.IndexFunc(se.New.Columns, func(c batch.Column) bool { return c.Name == "d" })
				if !se.New.Columns[i].NotNull {
					t.Errorf("the renamed column lost what was known of it: %+v", se.New.Columns[i])
				}
			}
		})
	}
}

// TestDecodeRelationEvents: every RELATION of a known table is reported with its relation ID (a
// re-created table of the same name shows a new one), also when its columns did not change; a
// table the stream does not know is not.
func TestDecodeRelationEvents(t *testing.T) {
	d := newDecoder(fakeResolve, []batch.Schema{knownSchema()}, slog.New(slog.DiscardHandler))
	begin := &pglogrepl.BeginMessage{FinalLSN: 1000, CommitTime: time.Unix(100, 0), Xid: 7}
	commit := &pglogrepl.CommitMessage{CommitLSN: 1000, TransactionEndLSN: 1050, CommitTime: time.Unix(100, 0)}
	cols := []pglogrepl.RelationMessageColumn{col("id", 23, true), col("doc", 25, false)}
	other := relMsg(8, 'd', cols...)
	other.RelationName = "other"
	evs, err := relationEvents(t, d, begin, relMsg(1, 'd', cols...), relMsg(1, 'd', cols...), relMsg(7, 'd', cols...), other, commit)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	for _, ev := range evs {
		if re, ok := ev.(*RelationEvent); ok {
			if re.Table != testTable {
				t.Errorf("RelationEvent of %s, want only %s", re.Table, testTable)
			}
			ids = append(ids, re.RelationID)
		}
	}
	if !slices.Equal(ids, []uint32{1, 1, 7}) {
		t.Errorf("relation IDs reported %v, want [1 1 7]", ids)
	}
}

// TestDecodeColumnDroppedAndAddedAgain: the last column dropped and added again under the same
// name and type gives a RELATION identical to the one before; only its attnum in the catalog
// tells, within a run (against the attnums read when the table was described) and at a run's
// first RELATION (against the recorded ones). Either way it is a drop and an add of the column.
func TestDecodeColumnDroppedAndAddedAgain(t *testing.T) {
	t.Parallel()
	cols := []pglogrepl.RelationMessageColumn{col("id", 23, true), col("doc", 25, false)}
	before := []catalogAttr{{1, "id", false}, {2, "doc", false}}
	after := []catalogAttr{{1, "id", false}, {2, "........pg.dropped.2........", true}, {3, "doc", false}}
	tests := []struct {
		name     string
		recorded map[string]int16
		first    []catalogAttr // the catalog at the first RELATION
		msgs     int           // RELATIONs sent (the catalog is after from the second on)
	}{
		{name: "within a run", first: before, msgs: 2},
		{name: "at a run's first RELATION", recorded: map[string]int16{"id": 1, "doc": 2}, first: after, msgs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDecoder(fakeResolve, []batch.Schema{knownSchema()}, slog.New(slog.DiscardHandler))
			calls := 0
			d.attrs = func(context.Context, uint32) ([]catalogAttr, error) {
				calls++
				if calls == 1 {
					return tt.first, nil
				}
				return after, nil
			}
			if tt.recorded != nil {
				d.recorded = map[batch.TableName]map[string]int16{testTable: tt.recorded}
			}
			msgs := []pglogrepl.Message{&pglogrepl.BeginMessage{FinalLSN: 10}}
			for range tt.msgs {
				msgs = append(msgs, relMsg(1, 'd', cols...))
			}
			evs, err := run(t, d, msgs...)
			if err != nil {
				t.Fatal(err)
			}
			var got []*SchemaEvent
			for _, ev := range evs {
				if se, ok := ev.(*SchemaEvent); ok {
					got = append(got, se)
				}
			}
			if len(got) != 1 || !slices.Equal(got[0].Dropped, []string{"doc"}) || !slices.Equal(got[0].Added, []string{"doc"}) {
				t.Fatalf("schema events %+v, want one that drops and adds doc", got)
			}
			// Described again at the new attnum, the next identical RELATION is no change.
			evs, err = run(t, d, relMsg(1, 'd', cols...))
			if err != nil || len(evs) != 0 {
				t.Fatalf("a further RELATION: events %v, err %v; want none", evs, err)
			}
		})
	}
}
