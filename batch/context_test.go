package batch

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestContextTail(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := Schema{Table: testTable, Columns: []Column{
		{Name: "id", TypeOID: oidInt8, Key: true},
		{Name: "note", TypeOID: oidText},
	}}
	rb, err := NewRecordBuilder(mem, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	commit := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	ingest := time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC)
	rows := []Change{
		{Op: OpSnapshot, Pos: Position{LSN: 0x16B3748}, Values: []Value{txt("1"), txt("a")}},
		{Op: OpInsert, Pos: Position{LSN: 0x16B3800, Seq: 0}, CommitTS: commit, Values: []Value{txt("2"), txt("b")}},
		{Op: OpUpdate, Pos: Position{LSN: 0x16B3800, Seq: 1}, CommitTS: commit, Values: []Value{txt("2"), null}},
		{Op: OpDelete, Pos: Position{LSN: 0x1_0000_0000, Seq: 0}, CommitTS: commit, Values: []Value{txt("1"), null}},
	}
	rec, err := rb.Build(rows, ingest)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if !rec.Schema().Equal(rb.Schema()) {
		t.Errorf("record schema differs from the builder's")
	}
	col := func(name string) []any {
		i, ok := ContextIndex(len(schema.Columns), name)
		if !ok || rec.Schema().Field(i).Name != name {
			t.Fatalf("ContextIndex(%s) = %d, %v", name, i, ok)
		}
		return goValues(rec.Column(i))
	}
	cts, its := arrow.Timestamp(commit.UnixMicro()), arrow.Timestamp(ingest.UnixMicro())
	want := map[string][]any{
		ColOp:       {"snapshot-read", "insert", "update", "delete"},
		ColPos:      {"0/16B3748:0", "0/16B3800:0", "0/16B3800:1", "1/0:0"},
		ColCommitTS: {nil, cts, cts, cts},
		ColIngestTS: {its, its, its, its},
		ColSnapshot: {"0/16B3748", nil, nil, nil},
		ColPhase:    {"snapshot", "stream", "stream", "stream"},
	}
	for name, w := range want {
		if got := col(name); !sameValues(got, w) {
			t.Errorf("%s = %v, want %v", name, got, w)
		}
	}
	positions, err := RowPositions(rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if positions[i] != r.Pos {
			t.Errorf("RowPositions[%d] = %s, want %s", i, positions[i], r.Pos)
		}
		if p, err := RowPosition(rec, i); err != nil || p != r.Pos {
			t.Errorf("RowPosition(%d) = %s, %v; want %s", i, p, err, r.Pos)
		}
	}
	if _, err := RowPosition(rec, len(rows)); err == nil {
		t.Error("RowPosition past the end succeeded")
	}

	// The builder is reusable after a failed build.
	if _, err := rb.Build([]Change{{Op: OpInsert, Values: []Value{txt("x"), null}}}, ingest); err == nil {
		t.Fatal("bad id built")
	}
	rec2, err := rb.Build(rows[1:2], ingest)
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Release()
	if rec2.NumRows() != 1 {
		t.Errorf("record after a failed build has %d rows, want 1", rec2.NumRows())
	}
}

func TestContextColumnNames(t *testing.T) {
	t.Parallel()
	fields := ContextFields()
	if len(fields) != NumContextColumns {
		t.Fatalf("%d context fields, want %d", len(fields), NumContextColumns)
	}
	for i, meta := range MetadataNames() {
		col, ok := ContextColumn(meta)
		if !ok || col != "__"+meta || fields[i].Name != col {
			t.Errorf("ContextColumn(%q) = %q, %v; field %d is %q", meta, col, ok, i, fields[i].Name)
		}
		if idx, ok := ContextIndex(3, col); !ok || idx != 3+i {
			t.Errorf("ContextIndex(3, %s) = %d, %v", col, idx, ok)
		}
	}
	if _, ok := ContextColumn("lsn"); ok {
		t.Error("unknown metadata name accepted")
	}
}
