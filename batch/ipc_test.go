package batch

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// allTypes is a table with one column of every mapped type.
var allTypes = Schema{Table: TableName{Schema: "shop", Name: "everything"}, Columns: []Column{
	{Name: "id", TypeOID: oidInt8, TypeName: "bigint", Key: true, NotNull: true},
	{Name: "i2", TypeOID: oidInt2, TypeName: "smallint"},
	{Name: "i4", TypeOID: oidInt4, TypeName: "integer"},
	{Name: "f4", TypeOID: oidFloat4, TypeName: "real"},
	{Name: "f8", TypeOID: oidFloat8, TypeName: "double precision"},
	{Name: "price", TypeOID: oidNumeric, TypeName: "numeric(12,2)", TypeMod: typmod(12, 2)},
	{Name: "amount", TypeOID: oidNumeric, TypeName: "numeric", TypeMod: -1},
	{Name: "ok", TypeOID: oidBool, TypeName: "boolean"},
	{Name: "note", TypeOID: oidText, TypeName: "text"},
	{Name: "code", TypeOID: oidBPChar, TypeName: "character(4)", TypeMod: 8},
	{Name: "blob", TypeOID: oidBytea, TypeName: "bytea"},
	{Name: "born", TypeOID: oidDate, TypeName: "date"},
	{Name: "at", TypeOID: oidTime, TypeName: "time without time zone"},
	{Name: "ts", TypeOID: oidTimestamp, TypeName: "timestamp without time zone"},
	{Name: "tstz", TypeOID: oidTimestamptz, TypeName: "timestamp with time zone"},
	{Name: "u", TypeOID: oidUUID, TypeName: "uuid"},
	{Name: "doc", TypeOID: oidJSONB, TypeName: "jsonb"},
	{Name: "mood", TypeOID: 91234, TypeName: "mood", Category: "E"},
	{Name: "ip", TypeOID: oidInet, TypeName: "inet"},
	{Name: "span", TypeOID: oidInterval, TypeName: "interval"},
	{Name: "tags", TypeOID: 1009, TypeName: "text[]"},
	{Name: "nums", TypeOID: 1231, TypeName: "numeric(5,1)[]", TypeMod: typmod(5, 1)},
}}

// allTypesRows returns three rows of allTypes: full values, NULLs, and a delete.
func allTypesRows() []Change {
	commit := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	full := []Value{txt("1"), txt("-2"), txt("3"), txt("NaN"), txt("-Infinity"), txt("-1234.50"), txt("3.14159265358979323846264338327950288419716939937510"),
		txt("t"), txt("ü€😀"), txt("ab  "), txt(`\xdeadbeef`), txt("0044-03-15 BC"), txt("23:59:59.999999"), txt("2100-01-01 00:00:00"),
		txt("1969-07-20 20:17:40+00"), txt("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), txt(`{"a": [1, 2]}`), txt("happy"), txt("10.0.0.1/8"),
		txt("1 year 2 mons -3 days +04:05:06.5"), txt(`{"a b",NULL,"q\"uote"}`), txt("{1.5,NULL,-2.0}")}
	nulls := make([]Value, len(full))
	for i := range nulls {
		nulls[i] = null
	}
	nulls[0] = txt("2")
	del := make([]Value, len(full))
	copy(del, nulls)
	del[0] = txt("3")
	return []Change{
		{Op: OpInsert, Pos: Position{LSN: 0x16B3748, Seq: 0}, CommitTS: commit, Values: full},
		{Op: OpUpdate, Pos: Position{LSN: 0x16B3748, Seq: 1}, CommitTS: commit, Values: nulls},
		{Op: OpDelete, Pos: Position{LSN: 0x16B3800, Seq: 0}, CommitTS: commit, Values: del},
	}
}

var testSource = SourceID{SystemID: "7311234567890123456", Timeline: 1, Slot: "sluice_shop"}

func buildAllTypes(t testing.TB, mem memory.Allocator) (arrow.RecordBatch, FileHeader) {
	t.Helper()
	rb, err := NewRecordBuilder(mem, allTypes)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	rows := allTypesRows()
	rec, err := rb.Build(rows, time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	h := FileHeader{Table: allTypes.Table, Phase: PhaseStream,
		Lo: SourcePosition{Source: testSource, Position: rows[0].Pos}, Hi: SourcePosition{Source: testSource, Position: rows[2].Pos}}
	return rec, h
}

// onlyReader hides every method but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestFileRoundTrip(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec, h := buildAllTypes(t, mem)
	defer rec.Release()
	for _, c := range []Compression{CompressionZstd, CompressionLZ4, CompressionNone} {
		var buf bytes.Buffer
		if err := WriteFile(&buf, rec, h, c); err != nil {
			t.Fatal(err)
		}
		for name, r := range map[string]io.Reader{"ReaderAt": bytes.NewReader(buf.Bytes()), "plain reader": onlyReader{bytes.NewReader(buf.Bytes())}} {
			checkRead(t, string(c)+" "+name, r, mem, rec, h)
		}
	}
	if err := WriteFile(io.Discard, rec, h, "snappy"); err == nil {
		t.Error("unknown compression accepted")
	}
	// The source columns travel in the header when the writer gives them.
	h.Columns = allTypes.Columns
	var buf bytes.Buffer
	if err := WriteFile(&buf, rec, h, CompressionLZ4); err != nil {
		t.Fatal(err)
	}
	checkRead(t, "with columns", bytes.NewReader(buf.Bytes()), mem, rec, h)
}

func checkRead(t *testing.T, name string, r io.Reader, mem memory.Allocator, rec arrow.RecordBatch, h FileHeader) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		got, gh, err := ReadFile(r, mem)
		if err != nil {
			t.Fatal(err)
		}
		defer got.Release()
		if !reflect.DeepEqual(gh, h) {
			t.Errorf("header %+v, want %+v", gh, h)
		}
		if !sameRecord(got, rec) {
			t.Errorf("record differs:\n%v\nwant\n%v", got, rec)
		}
		if !got.Schema().Equal(rec.Schema()) || got.Schema().HasMetadata() {
			t.Errorf("schema %v, want the builder's without metadata", got.Schema())
		}
	})
}

func TestFileIsCompressed(t *testing.T) {
	t.Parallel()
	mem := memory.NewGoAllocator()
	rb, err := NewRecordBuilder(mem, Schema{Table: testTable, Columns: []Column{{Name: "id", TypeOID: oidInt8, Key: true}, {Name: "v", TypeOID: oidText}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	rows := make([]Change, 10000)
	for i := range rows {
		rows[i] = Change{Op: OpInsert, Pos: Position{LSN: 1, Seq: uint32(i)}, Values: []Value{txt("42"), txt(strings.Repeat("abc", 30))}}
	}
	rec, err := rb.Build(rows, t0)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var buf bytes.Buffer
	h := FileHeader{Table: testTable, Phase: PhaseStream, Lo: SourcePosition{Source: testSource}, Hi: SourcePosition{Source: testSource, Position: Position{LSN: 1, Seq: 9999}}}
	if err := WriteFile(&buf, rec, h, CompressionZstd); err != nil {
		t.Fatal(err)
	}
	if raw := 10000 * (90 + 8); buf.Len() > raw/4 {
		t.Errorf("file of %d bytes for %d bytes of values: not compressed", buf.Len(), raw)
	}
}

func TestFileErrors(t *testing.T) {
	t.Parallel()
	mem := memory.NewGoAllocator()
	rec, h := buildAllTypes(t, mem)
	defer rec.Release()

	bad := h
	bad.Hi.Source.Slot = "other"
	if err := WriteFile(io.Discard, rec, bad, CompressionZstd); err == nil || !strings.Contains(err.Error(), "different sources") {
		t.Errorf("write with lo and hi of different sources: %v", err)
	}
	bad = h
	bad.Phase = "backfill"
	if err := WriteFile(io.Discard, rec, bad, CompressionZstd); err == nil || !strings.Contains(err.Error(), "phase") {
		t.Errorf("write with a bad phase: %v", err)
	}
	if _, _, err := ReadFile(strings.NewReader("not arrow"), mem); err == nil {
		t.Error("read of garbage succeeded")
	}
	// An Arrow file without the sluice metadata is refused.
	var buf bytes.Buffer
	fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadFile(bytes.NewReader(buf.Bytes()), mem); err == nil || !strings.Contains(err.Error(), FileKeyFormat) {
		t.Errorf("read of a foreign arrow file: %v", err)
	}
}

// TestFileGolden pins the file format: the file in testdata, written by an earlier version,
// must still read to the same record and header. Run with -update to rewrite it after an
// intended format change (and bump FileFormatVersion).
func TestFileGolden(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec, h := buildAllTypes(t, mem)
	defer rec.Release()
	path := filepath.Join("testdata", "batch_v"+FileFormatVersion+".arrow")
	if *update {
		var buf bytes.Buffer
		if err := WriteFile(&buf, rec, h, CompressionZstd); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run go test ./batch -run TestFileGolden -update to create it)", err)
	}
	defer f.Close()
	got, gh, err := ReadFile(f, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !reflect.DeepEqual(gh, h) {
		t.Errorf("header %+v, want %+v", gh, h)
	}
	if !got.Schema().Equal(rec.Schema()) {
		t.Errorf("golden schema\n%v\nwant\n%v", got.Schema(), rec.Schema())
	}
	if !sameRecord(got, rec) {
		t.Errorf("golden record\n%v\nwant\n%v", got, rec)
	}
}

// sameRecord compares records exactly, with NaN equal to NaN.
func sameRecord(a, b arrow.RecordBatch) bool {
	return array.RecordApproxEqual(a, b, array.WithNaNsEqual(true), array.WithAbsTolerance(0))
}
