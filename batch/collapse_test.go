package batch

import (
	"fmt"
	"strings"
	"testing"
)

var collapseSchema = Schema{Table: testTable, Columns: []Column{
	{Name: "id", TypeOID: oidInt8, Key: true},
	{Name: "a", TypeOID: oidText},
	{Name: "doc", TypeOID: oidText},
}}

// unchanged is an unchanged TOAST value.
var unchanged = Value{Unchanged: true}

// chg builds a change at position 1/seq of collapseSchema with values id, a, doc.
func chg(op Op, seq uint32, id, a, doc Value) Change {
	return Change{Op: op, Pos: Position{LSN: 1, Seq: seq}, Values: []Value{id, a, doc}}
}

// keyChg builds an update at 1/seq that moves the row from key oldID.
func keyChg(seq uint32, oldID, id, a, doc Value) Change {
	c := chg(OpUpdate, seq, id, a, doc)
	c.OldKey = []Value{oldID, null, null}
	return c
}

// describe formats collapsed rows as "op id a doc @seq" with NULL as ∅ and Unchanged as ~.
func describe(rows []Change) string {
	var out []string
	for _, r := range rows {
		parts := []string{r.Op.String()}
		for _, v := range r.Values {
			switch {
			case v.Unchanged:
				parts = append(parts, "~")
			case v.Null:
				parts = append(parts, "∅")
			default:
				parts = append(parts, string(v.Text))
			}
		}
		out = append(out, fmt.Sprintf("%s @%d", strings.Join(parts, " "), r.Pos.Seq))
	}
	return strings.Join(out, " | ")
}

func TestCollapse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   []Change
		want string
	}{
		{"insert update delete insert gives the insert",
			[]Change{chg(OpInsert, 0, txt("1"), txt("a0"), txt("d0")), chg(OpUpdate, 1, txt("1"), txt("a1"), txt("d1")),
				chg(OpDelete, 2, txt("1"), null, null), chg(OpInsert, 3, txt("1"), txt("a3"), txt("d3"))},
			"insert 1 a3 d3 @3"},
		{"ends with delete: delete carrying the key",
			[]Change{chg(OpInsert, 0, txt("1"), txt("a0"), txt("d0")), chg(OpUpdate, 1, txt("1"), txt("a1"), txt("d1")),
				chg(OpDelete, 2, txt("1"), txt("a1"), txt("d1"))},
			"delete 1 ∅ ∅ @2"},
		{"update takes unchanged TOAST from the earlier image",
			[]Change{chg(OpInsert, 0, txt("1"), txt("a0"), txt("big")), chg(OpUpdate, 1, txt("1"), txt("a1"), unchanged),
				chg(OpUpdate, 2, txt("1"), txt("a2"), unchanged)},
			"update 1 a2 big @2"},
		{"unchanged stays when there is no earlier image",
			[]Change{chg(OpUpdate, 0, txt("1"), txt("a0"), unchanged), chg(OpUpdate, 1, txt("1"), txt("a1"), unchanged)},
			"update 1 a1 ~ @1"},
		{"unchanged after a delete stays unchanged",
			[]Change{chg(OpInsert, 0, txt("1"), txt("a0"), txt("big")), chg(OpDelete, 1, txt("1"), null, null),
				chg(OpUpdate, 2, txt("1"), txt("a2"), unchanged)},
			"update 1 a2 ~ @2"},
		{"snapshot read then update",
			[]Change{chg(OpSnapshot, 0, txt("1"), txt("a0"), txt("big")), chg(OpUpdate, 1, txt("1"), txt("a1"), unchanged)},
			"update 1 a1 big @1"},
		{"key change: delete of the old key, upsert of the new with the old image's TOAST",
			[]Change{chg(OpInsert, 0, txt("1"), txt("a0"), txt("big")), keyChg(1, txt("1"), txt("2"), txt("a1"), unchanged)},
			"delete 1 ∅ ∅ @1 | update 2 a1 big @1"},
		{"key change without an earlier image keeps unchanged",
			[]Change{keyChg(0, txt("1"), txt("2"), txt("a0"), unchanged)},
			"delete 1 ∅ ∅ @0 | update 2 a0 ~ @0"},
		{"old key equal to the new key is a plain update",
			[]Change{chg(OpInsert, 0, txt("1"), txt("a0"), txt("big")), keyChg(1, txt("1"), txt("1"), txt("a1"), unchanged)},
			"update 1 a1 big @1"},
		{"key moved away and back",
			[]Change{chg(OpInsert, 0, txt("1"), txt("a0"), txt("d0")), keyChg(1, txt("1"), txt("2"), txt("a1"), txt("d1")),
				keyChg(2, txt("2"), txt("1"), txt("a2"), unchanged)},
			"delete 2 ∅ ∅ @2 | update 1 a2 d1 @2"},
		{"order of the last touch per key",
			[]Change{chg(OpInsert, 0, txt("1"), txt("a"), txt("d")), chg(OpInsert, 1, txt("2"), txt("b"), txt("d")),
				chg(OpUpdate, 2, txt("1"), txt("c"), txt("d")), chg(OpInsert, 3, txt("3"), txt("e"), txt("d"))},
			"insert 2 b d @1 | update 1 c d @2 | insert 3 e d @3"},
		{"delete with replica identity full keeps only the key",
			[]Change{chg(OpDelete, 0, txt("7"), txt("a"), txt("d"))},
			"delete 7 ∅ ∅ @0"},
		{"keys compare by text", // 01 and 1 are the same bigint but different text
			[]Change{chg(OpInsert, 0, txt("1"), txt("a"), txt("d")), chg(OpInsert, 1, txt("01"), txt("b"), txt("d"))},
			"insert 1 a d @0 | insert 01 b d @1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := NewCollapser(collapseSchema)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Collapse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if d := describe(got); d != tc.want {
				t.Errorf("got  %s\nwant %s", d, tc.want)
			}
		})
	}
}

func TestCollapseCompositeKey(t *testing.T) {
	t.Parallel()
	schema := Schema{Table: testTable, Columns: []Column{
		{Name: "a", TypeOID: oidText, Key: true}, {Name: "b", TypeOID: oidText, Key: true}, {Name: "v", TypeOID: oidText},
	}}
	c, err := NewCollapser(schema)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(seq uint32, a, b, v string) Change {
		return Change{Op: OpInsert, Pos: Position{LSN: 1, Seq: seq}, Values: []Value{txt(a), txt(b), txt(v)}}
	}
	got, err := c.Collapse([]Change{mk(0, "1", "23", "x"), mk(1, "12", "3", "y"), mk(2, "1", "23", "z")})
	if err != nil {
		t.Fatal(err)
	}
	if d := describe(got); d != "insert 12 3 y @1 | insert 1 23 z @2" {
		t.Errorf("got %s", d)
	}
	// The Collapser is reusable: a second batch starts empty.
	got, err = c.Collapse([]Change{mk(3, "1", "23", "w")})
	if err != nil || describe(got) != "insert 1 23 w @3" {
		t.Errorf("second batch: %s, %v", describe(got), err)
	}
}

func TestCollapseErrors(t *testing.T) {
	t.Parallel()
	if _, err := NewCollapser(Schema{Table: testTable, Columns: []Column{{Name: "v", TypeOID: oidText}}}); err == nil ||
		!strings.Contains(err.Error(), "no key column") {
		t.Errorf("NewCollapser without key: %v", err)
	}
	c, _ := NewCollapser(collapseSchema)
	if _, err := c.Collapse([]Change{chg(OpUpdate, 0, unchanged, txt("a"), txt("d"))}); err == nil ||
		!strings.Contains(err.Error(), `key column "id"`) {
		t.Errorf("unchanged key: %v", err)
	}
	if _, err := c.Collapse([]Change{{Op: OpInsert, Values: []Value{txt("1")}}}); err == nil {
		t.Error("short row accepted")
	}
}

// TestCollapseManyKeys checks the hash table with many keys and repeated touches.
func TestCollapseManyKeys(t *testing.T) {
	t.Parallel()
	c, _ := NewCollapser(collapseSchema)
	var in []Change
	for round := range 3 {
		for k := range 5000 {
			in = append(in, chg(OpUpdate, uint32(round*5000+k), txt(fmt.Sprint(k)), txt(fmt.Sprint(round)), null))
		}
	}
	got, err := c.Collapse(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5000 {
		t.Fatalf("%d rows, want 5000", len(got))
	}
	for i, r := range got {
		if string(r.Values[0].Text) != fmt.Sprint(i) || string(r.Values[1].Text) != "2" {
			t.Fatalf("row %d = %s", i, describe(got[i:i+1]))
		}
	}
}
