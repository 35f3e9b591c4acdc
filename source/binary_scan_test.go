package source

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
)

// TestScanChunkBinaryFormatsBuildTheSameRecord reads a table of integers, dates and timestamps
// twice under one snapshot, as text and in the builder's binary formats: the two records are
// equal value by value, edge values and NULLs included, and an infinite timestamp fails the same
// way in both.
func TestScanChunkBinaryFormatsBuildTheSameRecord(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		`CREATE TABLE b (id bigint PRIMARY KEY, s smallint, i int, l bigint, d date, ts timestamp, tz timestamptz, note text)`,
		`INSERT INTO b VALUES
		(1, -32768, -2147483648, -9223372036854775808, '4713-01-01 BC', '4713-01-01 00:00:00 BC', '4713-01-01 00:00:00+00 BC', 'min'),
		(2, 32767, 2147483647, 9223372036854775807, '9999-12-31', '99999-12-31 23:59:59.999999', '99999-12-31 23:59:59.999999+00', 'max'),
		(3, 0, 0, 0, '2000-01-01', '2000-01-01 00:00:00', '2000-01-01 00:00:00+00', 'pg epoch'),
		(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
		(5, 7, 8, 9, '1969-12-31', '1969-12-31 23:59:59.000001', '2026-12-01 04:05:06.789012+05:30', 'before 1970'),
		(6, 1, 1, 1, '1999-12-31', '1999-12-31 23:59:59.999999', '1999-12-31 23:59:59.999999-08', 'before 2000')`,
		`CREATE TABLE inf (id int PRIMARY KEY, ts timestamptz)`,
		`INSERT INTO inf VALUES (1, 'infinity')`)
	cfg := db.config(t, "b", "inf")
	info := setup(t, cfg)
	ctx := context.Background()
	snap, err := OpenSnapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)

	schema := info.Schemas[0]
	text := scanRecord(t, snap, schema, false)
	bin := scanRecord(t, snap, schema, true)
	if text.NumRows() != 6 {
		t.Fatalf("text read %d rows, want 6", text.NumRows())
	}
	formats := mustBuilder(t, schema).BinaryFormats()
	want := []int16{batch.FormatText, batch.FormatBinary, batch.FormatBinary, batch.FormatBinary, batch.FormatBinary,
		batch.FormatBinary, batch.FormatBinary, batch.FormatBinary}
	for j := range want {
		if formats[j] != want[j] {
			t.Errorf("column %s: format %d, want %d (keys stay text)", schema.Columns[j].Name, formats[j], want[j])
		}
	}
	for j := range schema.Columns {
		a, b := text.Column(j), bin.Column(j)
		if !array.Equal(a, b) {
			t.Errorf("column %s differs:\ntext   %v\nbinary %v", schema.Columns[j].Name, a, b)
		}
	}

	// Under one snapshot, key ranges read on several connections hold every row once, in order.
	if err := snap.OpenConns(ctx, 3); err != nil {
		t.Fatal(err)
	}
	ranges, err := snap.SplitKeyRanges(ctx, schema, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 4 || ranges[0].Lo != nil || ranges[3].Hi != nil {
		t.Fatalf("split ids 1..6 into %d ranges %v, want 4 open at both ends", len(ranges), ranges)
	}
	var ids []int64
	for _, r := range ranges {
		rec := copyRecord(t, snap, schema, r, 1)
		for i := range int(rec.NumRows()) {
			ids = append(ids, rec.Column(0).(*array.Int64).Value(i))
		}
	}
	if !slices.Equal(ids, []int64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("the ranges read ids %v, want 1..6 once each", ids)
	}
	whole := copyRecord(t, snap, schema, KeyRange{}, 4)
	for j := range schema.Columns {
		if !array.Equal(whole.Column(j), bin.Column(j)) {
			t.Errorf("column %s: binary COPY %v, binary query %v", schema.Columns[j].Name, whole.Column(j), bin.Column(j))
		}
	}

	inf := info.Schemas[1]
	for _, binary := range []bool{false, true} {
		b := mustBuilder(t, inf)
		var formats []int16
		if binary {
			formats = b.BinaryFormats()
		}
		_, err := snap.ScanChunk(ctx, inf, nil, 100, formats, func(c *batch.Change, raw [][]byte) error {
			return b.AppendRow(c, raw, formats, snap.Time())
		})
		var ve *batch.ValueError
		if !errors.As(err, &ve) || !errors.Is(ve.Kind, batch.ErrNotRepresentable) || ve.Column != "ts" {
			t.Errorf("binary %v: infinity read with error %v, want a not-representable ValueError on column ts", binary, err)
		}
	}
	// The binary COPY fails the same way, and its connections still read afterwards.
	for range 3 {
		b := mustBuilder(t, inf)
		formats := b.BinaryFormats()
		_, err := snap.CopyChunk(ctx, inf, nil, KeyRange{}, 100, formats, func(c *batch.Change, raw [][]byte) error {
			return b.AppendRow(c, raw, formats, snap.Time())
		})
		var ve *batch.ValueError
		if !errors.As(err, &ve) || !errors.Is(ve.Kind, batch.ErrNotRepresentable) || ve.Column != "ts" {
			t.Errorf("binary COPY: infinity read with error %v, want a not-representable ValueError on column ts", err)
		}
	}
	if rec := copyRecord(t, snap, schema, KeyRange{}, 100); rec.NumRows() != 6 {
		t.Errorf("after the failed reads, a binary COPY read %d rows, want 6", rec.NumRows())
	}
}

// mustBuilder returns a record builder of schema, released at cleanup.
func mustBuilder(t *testing.T, schema batch.Schema) *batch.RecordBuilder {
	t.Helper()
	b, err := batch.NewRecordBuilder(memory.DefaultAllocator, schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// scanRecord reads the whole table under snap into a record, as text or in the builder's binary
// formats.
func scanRecord(t *testing.T, snap *Snapshot, schema batch.Schema, binary bool) arrow.RecordBatch {
	t.Helper()
	b := mustBuilder(t, schema)
	var formats []int16
	if binary {
		formats = b.BinaryFormats()
	}
	_, err := snap.ScanChunk(context.Background(), schema, nil, 100, formats, func(c *batch.Change, raw [][]byte) error {
		return b.AppendRow(c, raw, formats, snap.Time())
	})
	if err != nil {
		t.Fatalf("scanning %s (binary %v): %v", schema.Table, binary, err)
	}
	rec := b.NewRecord()
	t.Cleanup(rec.Release)
	return rec
}

// copyRecord reads the rows of schema within rng under snap with CopyChunk in chunks of n, in
// the builder's binary formats, into one record.
func copyRecord(t *testing.T, snap *Snapshot, schema batch.Schema, rng KeyRange, n int) arrow.RecordBatch {
	t.Helper()
	b := mustBuilder(t, schema)
	formats := b.BinaryFormats()
	var after []batch.Value
	for {
		rows := 0
		last, err := snap.CopyChunk(context.Background(), schema, after, rng, n, formats, func(c *batch.Change, raw [][]byte) error {
			rows++
			return b.AppendRow(c, raw, formats, snap.Time())
		})
		if err != nil {
			t.Fatalf("copying %s in binary: %v", schema.Table, err)
		}
		if rows < n {
			break
		}
		after = last
	}
	rec := b.NewRecord()
	t.Cleanup(rec.Release)
	return rec
}
