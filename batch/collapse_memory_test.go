package batch

import (
	"runtime"
	"testing"
	"unsafe"
	"weak"
)

// TestCollapserKeepsNoValuesAfterClear checks that once a batch's rows are used and Clear is
// called, the Collapser holds none of the batch's values (the changes it was given, the deletes
// it made for key changes): the reader collapses the next batch while this one's values are
// collected.
func TestCollapserKeepsNoValuesAfterClear(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   func() []Change
		want string
	}{
		{"distinct keys", func() []Change {
			return []Change{chg(OpInsert, 0, txt("1"), txt("a"), txt("d")), chg(OpInsert, 1, txt("2"), txt("b"), txt("e"))}
		}, "insert 1 a d @0 | insert 2 b e @1"},
		{"one key twice", func() []Change {
			return []Change{chg(OpInsert, 0, txt("1"), txt("a"), txt("d")), chg(OpUpdate, 1, txt("1"), unchanged, txt("e"))}
		}, "update 1 a e @1"},
		{"a key change makes a delete", func() []Change {
			return []Change{chg(OpInsert, 0, txt("1"), txt("a"), txt("d")), keyChg(1, txt("1"), txt("2"), unchanged, txt("e"))}
		}, "delete 1 ∅ ∅ @1 | update 2 a e @1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := NewCollapser(collapseSchema)
			if err != nil {
				t.Fatal(err)
			}
			in := tc.in()
			var values []weak.Pointer[Value]
			for i := range in {
				values = append(values, weak.Make(&in[i].Values[0]))
			}
			rows, err := c.Collapse(in)
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(rows); got != tc.want {
				t.Fatalf("Collapse = %s, want %s", got, tc.want)
			}
			var made []weak.Pointer[Value]
			for i := range rows {
				made = append(made, weak.Make(&rows[i].Values[0]))
			}
			in, rows = nil, nil
			c.Clear()
			runtime.GC()
			for i, v := range append(values, made...) {
				if v.Value() != nil {
					t.Errorf("values %d are still in memory after Clear", i)
				}
			}
			runtime.KeepAlive(c)
		})
	}
}

// TestCollapserSlotSize keeps a key's slot small: a batch of 100,000 rows has 100,000 slots, so
// each byte of a slot is 100 KB of the worker's heap.
func TestCollapserSlotSize(t *testing.T) {
	t.Parallel()
	if n := unsafe.Sizeof(slot{}); n > 32 {
		t.Errorf("a collapser slot takes %d bytes, want at most 32", n)
	}
}
