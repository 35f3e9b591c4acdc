package source

import (
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

func TestKeyProblems(t *testing.T) {
	t.Parallel()
	cols := []attr{{Name: "id", NotNull: true}, {Name: "a", NotNull: true}, {Name: "b"}}
	// Every table has a unique index on a (NOT NULL), so a configured key a is unique: the
	// cases test the replica identity (TestPreflightProvesAConfiguredKeyUnique the uniqueness).
	uniqA := []uniqueIndex{{Name: "t_a", Columns: []string{"a"}}}
	tbl := func(identity string, pk, idx []string) tableInfo {
		return tableInfo{Name: testTable, Exists: true, Kind: "r", CanRead: true, Identity: identity, Columns: cols, PK: pk, IdentIdx: idx, Unique: uniqA}
	}
	notUnique := func(t tableInfo) tableInfo { t.Unique = nil; return t }
	tests := []struct {
		name       string
		t          tableInfo
		key        []string
		wantSubstr string // empty: no problem
	}{
		{"primary key", tbl("d", []string{"id"}, nil), nil, ""},
		{"no primary key, no key", tbl("d", nil, nil), nil, "no primary key"},
		{"identity nothing", tbl("n", []string{"id"}, nil), nil, "REPLICA IDENTITY NOTHING"},
		{"configured key under FULL", tbl("f", nil, nil), []string{"a"}, ""},
		{"configured key without identity", tbl("d", nil, nil), []string{"a"}, "not carried"},
		{"configured key in identity index", tbl("i", nil, []string{"a", "id"}), []string{"a"}, ""},
		{"configured key outside identity index", tbl("i", nil, []string{"id"}), []string{"a"}, "not carried"},
		// Part of the primary key is not unique by itself (here the index on a is).
		{"configured key inside primary key", tbl("d", []string{"id", "a"}, nil), []string{"a"}, ""},
		{"configured key part of the primary key, no unique index", notUnique(tbl("f", []string{"id", "a"}, nil)), []string{"a"}, "not proven unique"},
		{"configured key holding the primary key", notUnique(tbl("f", []string{"id"}, nil)), []string{"a", "id"}, ""},
		{"configured key of a table without unique index", notUnique(tbl("f", nil, nil)), []string{"a"}, "not proven unique"},
		{"configured key beside the unique index", tbl("f", nil, nil), []string{"id"}, "not proven unique"},
		{"configured nullable key", tbl("f", nil, nil), []string{"b"}, "allows NULL"},
		{"configured missing column", tbl("f", nil, nil), []string{"zz"}, "does not exist"},
		{"identity index without the primary key", tbl("i", []string{"id"}, []string{"a"}), nil, "does not contain the primary key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ps := keyProblems(tt.t, tt.key)
			if tt.wantSubstr == "" {
				if len(ps) > 0 {
					t.Fatalf("unexpected problems %v", ps)
				}
				return
			}
			if len(ps) != 1 || !strings.Contains(ps[0].String(), tt.wantSubstr) || ps[0].Fix == "" {
				t.Fatalf("want one problem with %q and a fix, got %v", tt.wantSubstr, ps)
			}
		})
	}
}

func TestSafeFlush(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		own, last   uint64
		low         batch.Position
		outstanding bool
		want        uint64
	}{
		{"nothing outstanding confirms the reader's position", 900, 100, batch.Position{}, false, 900},
		{"outstanding change holds at its commit LSN", 900, 100, batch.Position{LSN: 500, Seq: 3}, true, 500},
		{"outstanding above the reader's position", 900, 100, batch.Position{LSN: 950}, true, 900},
		{"never moves back", 900, 600, batch.Position{LSN: 500}, true, 600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := safeFlush(tt.own, tt.last, tt.low, tt.outstanding); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestQueries(t *testing.T) {
	t.Parallel()
	s := batch.Schema{Table: batch.TableName{Schema: "shop", Name: `Or"ders`}, Columns: []batch.Column{
		{Name: "a", Key: true}, {Name: "doc"}, {Name: "b", Key: true},
	}}
	tests := []struct {
		name, got, want string
	}{
		{"first chunk", must(chunkQuery(s, "", false, 10)), `SELECT "a", "doc", "b" FROM "shop"."Or""ders" ORDER BY "a", "b" LIMIT 10`},
		{"next chunk", must(chunkQuery(s, "", true, 10)), `SELECT "a", "doc", "b" FROM "shop"."Or""ders" WHERE ("a", "b") > ($1, $2) ORDER BY "a", "b" LIMIT 10`},
		{"lookup", lookupQuery(s, []int{1}, 2), `SELECT "a", "b", "doc" FROM "shop"."Or""ders" WHERE ("a", "b") IN (($1, $2), ($3, $4))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.got != tt.want {
				t.Errorf("got  %s\nwant %s", tt.got, tt.want)
			}
		})
	}
	if _, err := chunkQuery(batch.Schema{Table: testTable, Columns: []batch.Column{{Name: "x"}}}, "", false, 1); err == nil {
		t.Error("a table without key columns must be an error")
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := Config{DSN: "postgres://u:secret@localhost/db", Slot: "sluice_p", Publication: "sluice_p",
		Tables: []TableConfig{{Table: batch.TableName{Schema: "public", Name: "t"}}}}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"valid", func(*Config) {}, nil},
		{"bad slot", func(c *Config) { c.Slot = "Bad-Slot" }, []string{"slot name"}},
		{"no tables and no publication", func(c *Config) { c.Tables = nil; c.Publication = "" }, []string{"no tables", "publication name"}},
		{"duplicate table and key", func(c *Config) {
			c.Tables = append(c.Tables, TableConfig{Table: c.Tables[0].Table, Key: []string{"a", "a"}})
		}, []string{"listed twice", "repeated"}},
		{"bad DSN does not leak", func(c *Config) { c.DSN = "postgres://u:secret@local host:x/db" }, []string{"cannot be parsed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := good
			c.Tables = append([]TableConfig(nil), good.Tables...)
			tt.mutate(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error leaks the password: %q", err)
			}
		})
	}
}

func TestCopyRowAndKeys(t *testing.T) {
	t.Parallel()
	vals := copyRow([][]byte{[]byte("1"), nil, {}, []byte("x:y")})
	if vals[0].Null || string(vals[0].Text) != "1" || !vals[1].Null || vals[2].Null || len(vals[2].Text) != 0 {
		t.Fatalf("copyRow: %+v", vals)
	}
	// Lengths keep keys unambiguous: ("1:2","") differs from ("1","2").
	a := keyString([]batch.Value{{Text: []byte("1:2")}, {Text: []byte("")}}, []int{0, 1})
	b := keyString([]batch.Value{{Text: []byte("1")}, {Text: []byte("2")}}, []int{0, 1})
	if a == b {
		t.Errorf("keyString collides: %q", a)
	}
}
