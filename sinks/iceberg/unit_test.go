package iceberg

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
)

// TestNewValidatesWithConfig checks that New refuses an invalid section with package config's
// problems (one validator, full key paths), before connecting to anything.
func TestNewValidatesWithConfig(t *testing.T) {
	t.Parallel()
	_, err := New(t.Context(), Config{
		Catalog:          CatalogConfig{Type: CatalogSQL, Dialect: "mysql"},
		Warehouse:        "gs://b/x",
		PartitionBuckets: -1,
		CompressionLevel: 23,
	}, Options{})
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("New: %v, want a *config.Error", err)
	}
	for _, w := range []string{"sink.iceberg.catalog.uri", "sink.iceberg.catalog.dialect", "sink.iceberg.warehouse",
		"sink.iceberg.partition_buckets", "sink.iceberg.compression_level"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

func TestLocations(t *testing.T) {
	t.Parallel()
	if w := warehouseURL("rel/wh"); !strings.HasPrefix(w, "file:///") || !strings.HasSuffix(w, "/rel/wh") {
		t.Errorf("warehouse %q, want an absolute file:// URL", w)
	}
	if w := warehouseURL("s3://b/wh"); w != "s3://b/wh" {
		t.Errorf("warehouse %q, want it unchanged", w)
	}
	if got := sqliteDSN("/x/c.db"); !strings.HasPrefix(got, "file:/x/c.db?") || !strings.Contains(got, "busy_timeout") {
		t.Errorf("sqliteDSN = %q", got)
	}
	if got := sqliteDSN("file:c.db?mode=rw"); got != "file:c.db?mode=rw" {
		t.Errorf("sqliteDSN kept no user DSN: %q", got)
	}
}

func TestPositionEncoding(t *testing.T) {
	t.Parallel()
	p := batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: 0x16B3748, Seq: 12}}
	s, err := encodePosition(p)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in     string
		want   batch.SourcePosition
		wantOK bool
		err    bool
	}{
		{s, p, true, false},
		{noPosition, batch.SourcePosition{}, false, false},
		{"{not json", batch.SourcePosition{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, ok, err := decodePosition(tt.in)
			if (err != nil) != tt.err || ok != tt.wantOK || got != tt.want {
				t.Errorf("decodePosition(%q) = %v, %v, %v", tt.in, got, ok, err)
			}
		})
	}
}

func TestReadOps(t *testing.T) {
	t.Parallel()
	mem := memory.DefaultAllocator
	strs := func(vals ...string) arrow.Array {
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.AppendValues(vals, nil)
		return b.NewArray()
	}
	ints := func(vals ...uint8) arrow.Array {
		b := array.NewUint8Builder(mem)
		defer b.Release()
		b.AppendValues(vals, nil)
		return b.NewArray()
	}
	tests := []struct {
		name   string
		col    arrow.Array
		want   []batch.Op
		poison bool
	}{
		{"names", strs("insert", "update", "delete", "snapshot-read"),
			[]batch.Op{batch.OpInsert, batch.OpUpdate, batch.OpDelete, batch.OpSnapshot}, false},
		{"numbers", ints(1, 3, 4), []batch.Op{batch.OpInsert, batch.OpDelete, batch.OpSnapshot}, false},
		{"unknown name", strs("upsert"), nil, true},
		{"unknown number", ints(9), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer tt.col.Release()
			sc := arrow.NewSchema([]arrow.Field{{Name: opColumn, Type: tt.col.DataType()}}, nil)
			rec := array.NewRecordBatch(sc, []arrow.Array{tt.col}, int64(tt.col.Len()))
			defer rec.Release()
			got, err := readOps(rec, "shop.orders")
			if tt.poison {
				if !sinks.IsPoison(err) {
					t.Fatalf("readOps: %v, want poison", err)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("readOps = %v, %v; want %v", got, err, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("row %d: %s, want %s", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestKeyRange(t *testing.T) {
	t.Parallel()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{50, 7, 99, 3}, nil)
	col := b.NewArray()
	b.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, 4)
	col.Release()
	defer rec.Release()
	c := outCol{src: "id", name: "id", field: sc.Field(0)}

	expr, ok := keyRange(rec, []bool{true, true, false, false}, c)
	if !ok {
		t.Fatal("no range for an int64 key")
	}
	if got := expr.String(); !strings.Contains(got, "7") || !strings.Contains(got, "50") || strings.Contains(got, "99") {
		t.Errorf("range of the selected rows 50 and 7 = %s", got)
	}
	if _, ok := keyRange(rec, []bool{false, false, false, false}, c); ok {
		t.Errorf("a range of no rows")
	}
}
