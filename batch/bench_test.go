package batch

import (
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ordersSchema is a 7-column table like the reference orders table.
var ordersSchema = Schema{Table: testTable, Columns: []Column{
	{Name: "id", TypeOID: oidInt8, TypeName: "bigint", Key: true, NotNull: true},
	{Name: "customer_id", TypeOID: oidInt4, TypeName: "integer"},
	{Name: "amount", TypeOID: oidNumeric, TypeName: "numeric(12,2)", TypeMod: typmod(12, 2)},
	{Name: "status", TypeOID: oidText, TypeName: "text"},
	{Name: "created_at", TypeOID: oidTimestamptz, TypeName: "timestamp with time zone"},
	{Name: "ref", TypeOID: oidUUID, TypeName: "uuid"},
	{Name: "note", TypeOID: oidText, TypeName: "text"},
}}

// ordersChanges returns n changes over n/2 keys (every key inserted then updated).
func ordersChanges(n int) []Change {
	out := make([]Change, n)
	for i := range out {
		id := i % (n / 2)
		op := OpInsert
		if i >= n/2 {
			op = OpUpdate
		}
		out[i] = Change{Op: op, Pos: Position{LSN: 0x5000, Seq: uint32(i)}, CommitTS: t0, Values: []Value{
			txt(fmt.Sprint(id)), txt(fmt.Sprint(id % 977)), txt(fmt.Sprintf("%d.%02d", id%100000, id%100)),
			txt("shipped"), txt("2026-11-30 12:34:56.789012+00"), txt("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
			txt("a note of about forty bytes of free text"),
		}}
	}
	return out
}

// BenchmarkBuildRecord measures building the Arrow record of 10,000 changes.
func BenchmarkBuildRecord(b *testing.B) {
	rows := ordersChanges(10_000)
	rb, err := NewRecordBuilder(memory.NewGoAllocator(), ordersSchema)
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Release()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec, err := rb.Build(rows, t0)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

// BenchmarkCollapseAndBuild measures the hot path of a cut batch: collapse 10,000 changes
// (5,000 keys) and build the record.
func BenchmarkCollapseAndBuild(b *testing.B) {
	src := ordersChanges(10_000)
	rows := make([]Change, len(src))
	c, err := NewCollapser(ordersSchema)
	if err != nil {
		b.Fatal(err)
	}
	rb, err := NewRecordBuilder(memory.NewGoAllocator(), ordersSchema)
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Release()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		copy(rows, src) // Collapse rewrites values in place; the values here are not changed
		out, err := c.Collapse(rows)
		if err != nil {
			b.Fatal(err)
		}
		rec, err := rb.Build(out, t0)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/change")
}

// BenchmarkWriteFile measures writing a 10,000-row record as a batch file.
func BenchmarkWriteFile(b *testing.B) {
	for _, c := range []Compression{CompressionZstd, CompressionLZ4} {
		b.Run(string(c), func(b *testing.B) { benchmarkWriteFile(b, c) })
	}
}

func benchmarkWriteFile(b *testing.B, c Compression) {
	rb, err := NewRecordBuilder(memory.NewGoAllocator(), ordersSchema)
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Release()
	rows := ordersChanges(10_000)
	rec, err := rb.Build(rows, t0)
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Release()
	h := FileHeader{Table: testTable, Phase: PhaseStream, Lo: SourcePosition{Source: testSource, Position: rows[0].Pos},
		Hi: SourcePosition{Source: testSource, Position: rows[len(rows)-1].Pos}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := WriteFile(io.Discard, rec, h, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}
