package source

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
)

func TestStreamPerTableOrder(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		"CREATE TABLE a (id int PRIMARY KEY, v text)",
		"CREATE TABLE b (id int PRIMARY KEY, v text, n int)")
	cfg := db.config(t, "a", "b")
	info := setup(t, cfg)
	db.exec(t, `BEGIN;
INSERT INTO a VALUES (1, 'a1');
INSERT INTO b VALUES (1, 'b1', 1);
UPDATE a SET v = 'a1x' WHERE id = 1;
INSERT INTO b VALUES (2, 'b2', 2);
COMMIT`)
	db.exec(t, `BEGIN; UPDATE b SET n = 10 WHERE id = 1; INSERT INTO a VALUES (2, 'a2'); DELETE FROM b WHERE id = 2; COMMIT`)
	db.exec(t, `INSERT INTO a VALUES (3, 'a3')`)
	evs := stream(t, cfg, info.Schemas, db.walLSN(t))

	tests := []struct {
		table string
		want  [][]string // op then values
	}{
		{"public.a", [][]string{{"insert", "1", "a1"}, {"update", "1", "a1x"}, {"insert", "2", "a2"}, {"insert", "3", "a3"}}},
		{"public.b", [][]string{{"insert", "1", "b1", "1"}, {"insert", "2", "b2", "2"}, {"update", "1", "b1", "10"}, {"delete", "2", "<null>", "<null>"}}},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			changes := changesOf(evs, tt.table)
			var got [][]string
			for i, c := range changes {
				got = append(got, append([]string{c.Op.String()}, rowText(c.Values)...))
				if i > 0 && !changes[i-1].Pos.Less(c.Pos) {
					t.Errorf("change %d at %s does not follow %s", i, c.Pos, changes[i-1].Pos)
				}
			}
			if !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
		})
	}
	// Transactions arrive whole: begin, its changes (all at its commit LSN), commit.
	var open *BeginEvent
	for _, ev := range evs {
		switch e := ev.(type) {
		case *BeginEvent:
			open = e
		case *ChangeEvent:
			if open == nil || e.Change.Pos.LSN != open.LSN || e.Change.Pos.Seq == 0 {
				t.Fatalf("change at %s outside its transaction %+v", e.Change.Pos, open)
			}
		case *CommitEvent:
			if open == nil || e.LSN != open.LSN || e.EndLSN <= e.LSN {
				t.Fatalf("commit %+v does not close %+v", e, open)
			}
			open = nil
		}
	}
}

func TestStreamKeyChangeGivesOldKey(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		"CREATE TABLE k (a int, b text, v text, PRIMARY KEY (a, b))",
		"CREATE TABLE kf (id int NOT NULL, v text)",
		"CREATE UNIQUE INDEX kf_id ON kf (id)",
		"ALTER TABLE kf REPLICA IDENTITY FULL")
	cfg := db.config(t, "k", "kf")
	cfg.Tables[1].Key = []string{"id"}
	info := setup(t, cfg)
	db.exec(t, "INSERT INTO k VALUES (1, 'x', 'v1'), (2, 'y', 'v2')")
	db.exec(t, "UPDATE k SET b = 'z' WHERE a = 1")
	db.exec(t, "UPDATE k SET v = 'v2b' WHERE a = 2")
	db.exec(t, "INSERT INTO kf VALUES (1, 'one')")
	db.exec(t, "UPDATE kf SET id = 5 WHERE id = 1")
	evs := stream(t, cfg, info.Schemas, db.walLSN(t))

	tests := []struct {
		table   string
		index   int
		want    []string
		wantOld []string // nil: no OldKey
	}{
		{"public.k", 2, []string{"1", "z", "v1"}, []string{"1", "x", "<null>"}},
		{"public.k", 3, []string{"2", "y", "v2b"}, nil},
		{"public.kf", 1, []string{"5", "one"}, []string{"1", "<null>"}},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			changes := changesOf(evs, tt.table)
			if len(changes) <= tt.index {
				t.Fatalf("only %d changes", len(changes))
			}
			c := changes[tt.index]
			if c.Op != batch.OpUpdate || !slices.Equal(rowText(c.Values), tt.want) {
				t.Errorf("got %s %v, want update %v", c.Op, rowText(c.Values), tt.want)
			}
			if got := rowText(c.OldKey); (tt.wantOld == nil) != (c.OldKey == nil) || !slices.Equal(got, tt.wantOld) && tt.wantOld != nil {
				t.Errorf("old key %v, want %v", got, tt.wantOld)
			}
		})
	}
}

func TestStreamSchemaChangesAndTruncate(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "CREATE TABLE s (id int PRIMARY KEY, a text, b int)")
	cfg := db.config(t, "s")
	info := setup(t, cfg)
	db.exec(t, "INSERT INTO s VALUES (1, 'x', 1)")
	db.exec(t, "ALTER TABLE s ADD COLUMN c numeric(10,2)")
	db.exec(t, "INSERT INTO s VALUES (2, 'y', 2, 3.5)")
	db.exec(t, "ALTER TABLE s DROP COLUMN a")
	db.exec(t, "ALTER TABLE s ALTER COLUMN b TYPE bigint")
	db.exec(t, "INSERT INTO s VALUES (3, 4, 5.25)")
	db.exec(t, "TRUNCATE s")
	db.exec(t, "INSERT INTO s VALUES (4, 5, NULL)")
	db.exec(t, "ALTER TABLE s RENAME TO s2")
	db.exec(t, "INSERT INTO s2 VALUES (5, 6, 1)")
	evs := stream(t, cfg, info.Schemas, db.walLSN(t))

	var got []string
	for _, ev := range evs {
		switch e := ev.(type) {
		case *SchemaEvent:
			s := "schema"
			for _, n := range e.Added {
				s += " +" + n
			}
			for _, n := range e.Dropped {
				s += " -" + n
			}
			for _, n := range e.Retyped {
				s += " ~" + n
			}
			if e.Renamed {
				s += " renamed " + e.Old.Table.String() + " to " + e.New.Table.String()
			}
			got = append(got, s)
		case *ChangeEvent:
			got = append(got, e.Change.Op.String()+" "+joinText(e.Change.Values))
		case *TruncateEvent:
			got = append(got, "truncate "+e.Table.String())
		}
	}
	want := []string{
		"insert 1,x,1",
		"schema +c", "insert 2,y,2,3.50",
		"schema -a ~b", "insert 3,4,5.25",
		"truncate public.s",
		"insert 4,5,<null>",
		"schema renamed public.s to public.s2", "insert 5,6,1.00",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	for _, ev := range evs {
		if e, ok := ev.(*SchemaEvent); ok && len(e.Retyped) > 0 {
			c := e.New.Columns[1]
			if c.Name != "b" || c.TypeOID != 20 || c.TypeName != "bigint" || e.New.Columns[0].Key != true {
				t.Errorf("retyped schema %+v", e.New)
			}
		}
	}
}

func joinText(vals []batch.Value) string {
	s := ""
	for i, v := range rowText(vals) {
		if i > 0 {
			s += ","
		}
		s += v
	}
	return s
}

func TestStreamRenamedTables(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		"CREATE TABLE r1 (id int PRIMARY KEY)",
		"CREATE TABLE r2 (id int PRIMARY KEY)")
	cfg := db.config(t, "r1", "r2")
	info := setup(t, cfg)

	// Renamed after the reader started, before its first change: reported as a rename.
	renamed := make(chan *SchemaEvent, 1)
	started := make(chan struct{}, 1)
	_, stop := runStream(t, cfg, StreamOptions{Schemas: info.Schemas, Safe: nothingHeld}, func(_ context.Context, ev Event) error {
		switch e := ev.(type) {
		case *ProgressEvent:
			select {
			case started <- struct{}{}:
			default:
			}
		case *SchemaEvent:
			renamed <- e
		}
		return nil
	})
	<-started
	db.exec(t, "ALTER TABLE r1 RENAME TO r1_new")
	db.exec(t, "INSERT INTO r1_new VALUES (1)")
	var e *SchemaEvent
	select {
	case e = <-renamed:
		if !e.Renamed || e.Old == nil || e.Old.Table.Name != "r1" || e.New.Table.Name != "r1_new" {
			t.Errorf("want a rename of r1 to r1_new, got %+v", e)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no schema event for the renamed table")
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	// Renamed while no reader runs and before the table's next change: the reader cannot know
	// the new name belongs to r2, and reports an unknown table instead of ignoring it.
	db.exec(t, "ALTER TABLE r2 RENAME TO r2_new")
	db.exec(t, "INSERT INTO r2_new VALUES (1)")
	var unknown *SchemaEvent
	info.Schemas[0] = e.New
	for _, ev := range stream(t, cfg, info.Schemas, db.walLSN(t)) {
		if se, ok := ev.(*SchemaEvent); ok {
			unknown = se
		}
	}
	if unknown == nil || unknown.Old != nil || unknown.New.Table.Name != "r2_new" || !unknown.New.Columns[0].Key {
		t.Fatalf("want a schema event for unknown table r2_new, got %+v", unknown)
	}
}
