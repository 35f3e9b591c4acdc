package batch

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestCollapseRecord(t *testing.T) {
	t.Parallel()
	schema := Schema{Table: testTable, Columns: []Column{
		{Name: "tenant", TypeOID: oidText, Key: true},
		{Name: "id", TypeOID: oidInt8, Key: true},
		{Name: "a", TypeOID: oidText},
	}}
	row := func(op Op, seq uint32, tenant, id, a Value) Change {
		return Change{Op: op, Pos: Position{LSN: 1, Seq: seq}, Values: []Value{tenant, id, a}}
	}
	cases := []struct {
		name        string
		rows        []Change
		want        string // "op tenant/id a @seq" of the kept rows, in order
		wantDropped int64
	}{
		{"distinct keys kept as they are",
			[]Change{row(OpInsert, 1, txt("t"), txt("1"), txt("a")), row(OpInsert, 2, txt("t"), txt("2"), txt("b"))},
			"insert t/1 a @1 | insert t/2 b @2", 0},
		{"the last row of a key wins, in the order of last rows",
			[]Change{row(OpInsert, 1, txt("t"), txt("1"), txt("a")), row(OpInsert, 2, txt("t"), txt("2"), txt("b")),
				row(OpUpdate, 3, txt("t"), txt("1"), txt("c")), row(OpInsert, 4, txt("t"), txt("3"), txt("d"))},
			"insert t/2 b @2 | update t/1 c @3 | insert t/3 d @4", 1},
		{"a delete after an update is kept",
			[]Change{row(OpUpdate, 1, txt("t"), txt("1"), txt("a")), row(OpInsert, 2, txt("t"), txt("2"), txt("b")),
				row(OpDelete, 3, txt("t"), txt("1"), null)},
			"insert t/2 b @2 | delete t/1 ∅ @3", 1},
		{"an insert after a delete wins",
			[]Change{row(OpDelete, 1, txt("t"), txt("1"), null), row(OpInsert, 2, txt("t"), txt("1"), txt("b"))},
			"insert t/1 b @2", 1},
		{"every column of the key counts",
			[]Change{row(OpInsert, 1, txt("t"), txt("1"), txt("a")), row(OpInsert, 2, txt("u"), txt("1"), txt("b")),
				row(OpInsert, 3, txt("t1"), txt("1"), txt("c")), row(OpInsert, 4, txt("t"), txt("11"), txt("d"))},
			"insert t/1 a @1 | insert u/1 b @2 | insert t1/1 c @3 | insert t/11 d @4", 0},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rb, err := NewRecordBuilder(mem, schema)
			if err != nil {
				t.Fatal(err)
			}
			defer rb.Release()
			rec, err := rb.Build(tt.rows, time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			out, dropped, err := CollapseRecord(mem, rec, schema.KeyIndexes())
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			var got []string
			pos, err := RowPositions(out)
			if err != nil {
				t.Fatal(err)
			}
			op, _ := ContextIndex(len(schema.Columns), ColOp)
			for i := range int(out.NumRows()) {
				got = append(got, fmt.Sprintf("%s %s/%s %s @%d", out.Column(op).ValueStr(i),
					valueStr(out, 0, i), valueStr(out, 1, i), valueStr(out, 2, i), pos[i].Seq))
			}
			if g := strings.Join(got, " | "); g != tt.want || dropped != tt.wantDropped {
				t.Errorf("collapsed to %q dropping %d rows, want %q dropping %d", g, dropped, tt.want, tt.wantDropped)
			}
		})
	}
}

func TestCollapseRecordWithoutKey(t *testing.T) {
	t.Parallel()
	rb, err := NewRecordBuilder(memory.DefaultAllocator, Schema{Table: testTable, Columns: []Column{{Name: "a", TypeOID: oidText}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	rec, err := rb.Build(nil, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if _, _, err := CollapseRecord(memory.DefaultAllocator, rec, nil); err == nil || !strings.Contains(err.Error(), "no key column") {
		t.Errorf("collapsing without a key: %v, want an error that says so", err)
	}
}

// valueStr is column j of row i as ValueStr gives it, ∅ for NULL.
func valueStr(rec arrow.RecordBatch, j, i int) string {
	if rec.Column(j).IsNull(i) {
		return "∅"
	}
	return rec.Column(j).ValueStr(i)
}

func TestConcatRecords(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	build := func(cols []Column, rows ...Change) arrow.RecordBatch {
		rb, err := NewRecordBuilder(mem, Schema{Table: testTable, Columns: cols})
		if err != nil {
			t.Fatal(err)
		}
		defer rb.Release()
		rec, err := rb.Build(rows, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	id := Column{Name: "id", TypeOID: oidInt8, Key: true}
	a := build([]Column{id}, Change{Op: OpInsert, Pos: Position{LSN: 1}, Values: []Value{txt("1")}})
	defer a.Release()
	b := build([]Column{id}, Change{Op: OpInsert, Pos: Position{LSN: 2}, Values: []Value{txt("2")}},
		Change{Op: OpInsert, Pos: Position{LSN: 3}, Values: []Value{txt("3")}})
	defer b.Release()
	out, err := ConcatRecords(mem, []arrow.RecordBatch{a, b})
	if err != nil {
		t.Fatal(err)
	}
	pos, err := RowPositions(out)
	out.Release()
	if err != nil || fmt.Sprint(pos) != "[0/1:0 0/2:0 0/3:0]" {
		t.Errorf("concatenated rows at %v (%v), want 0/1:0 0/2:0 0/3:0", pos, err)
	}
	other := build([]Column{id, {Name: "extra", TypeOID: oidText}})
	defer other.Release()
	if _, err := ConcatRecords(mem, []arrow.RecordBatch{a, other}); err == nil || !strings.Contains(err.Error(), "record 1 has fields") {
		t.Errorf("concatenating records of other fields: %v, want an error naming the record", err)
	}
}
