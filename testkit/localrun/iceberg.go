package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/sinks/iceberg"
)

// Table is the rows of a table as text, keyed by the text of its key column.
type Table struct {
	Columns []string
	Rows    map[string][]string
	// Stored, set on a sink's table when the sink documents a lossy mapping (docs/types.md),
	// returns what the sink stores for the source text of column i; Diff compares the source
	// through it. Nil: the sink stores every value exactly.
	Stored func(column int, text string) string
}

// ScanIceberg reads the Iceberg target of cfg's sink with deletes applied: the table as a
// user's query engine would return it.
func ScanIceberg(ctx context.Context, cfg *config.Config, target, key string, columns []string) (Table, error) {
	sink, err := openIceberg(ctx, cfg)
	if err != nil {
		return Table{}, err
	}
	defer sink.Close(context.WithoutCancel(ctx))
	ns, name, _ := strings.Cut(target, ".")
	tbl, err := sink.Catalog().LoadTable(ctx, table.Identifier{ns, name})
	if err != nil {
		return Table{}, fmt.Errorf("loading iceberg table %s: %w", target, err)
	}
	_, itr, err := tbl.Scan(table.WithSelectedFields(columns...)).ToArrowRecords(ctx)
	if err != nil {
		return Table{}, fmt.Errorf("scanning %s: %w", target, err)
	}
	out := Table{Columns: columns, Rows: map[string][]string{}}
	for rec, err := range itr {
		if err != nil {
			return Table{}, fmt.Errorf("scanning %s: %w", target, err)
		}
		if err := addRows(&out, rec, key); err != nil {
			rec.Release()
			return Table{}, fmt.Errorf("scanning %s: %w", target, err)
		}
		rec.Release()
	}
	return out, nil
}

// IcebergFiles counts the live files of an Iceberg target of cfg's sink.
func IcebergFiles(ctx context.Context, cfg *config.Config, target string) (iceberg.FileStats, error) {
	sink, err := openIceberg(ctx, cfg)
	if err != nil {
		return iceberg.FileStats{}, err
	}
	defer sink.Close(context.WithoutCancel(ctx))
	return sink.Files(ctx, target)
}

// openIceberg opens cfg's sink, which must be Iceberg; the caller closes it.
func openIceberg(ctx context.Context, cfg *config.Config) (*iceberg.Sink, error) {
	s, err := pipeline.Open(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	sink, ok := s.(*iceberg.Sink)
	if !ok {
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("sink %s is not iceberg", cfg.Sink.Type)
	}
	return sink, nil
}

func addRows(t *Table, rec arrow.RecordBatch, key string) error {
	idx := map[string]int{}
	for i, f := range rec.Schema().Fields() {
		idx[f.Name] = i
	}
	k, ok := idx[key]
	if !ok {
		return fmt.Errorf("no key column %s", key)
	}
	for r := 0; r < int(rec.NumRows()); r++ {
		row := make([]string, len(t.Columns))
		for c, name := range t.Columns {
			row[c] = valueText(rec.Column(idx[name]), r)
		}
		kv := rec.Column(k).ValueStr(r)
		if _, dup := t.Rows[kv]; dup {
			return fmt.Errorf("key %s is visible twice", kv)
		}
		t.Rows[kv] = row
	}
	return nil
}

// valueText formats a value in the canonical text ScanPostgres produces: decimals keep their
// scale, timestamps are UTC RFC 3339 with microseconds, lists are JSON arrays.
func valueText(col arrow.Array, r int) string {
	if col.IsNull(r) {
		return "NULL"
	}
	switch c := col.(type) {
	case *array.Decimal128:
		return c.Value(r).ToString(c.DataType().(*arrow.Decimal128Type).Scale)
	case *array.Timestamp:
		unit := c.DataType().(*arrow.TimestampType).Unit
		return c.Value(r).ToTime(unit).UTC().Format(timestampLayout)
	case *array.List:
		start, end := c.ValueOffsets(r)
		elems := make([]string, 0, end-start)
		for i := int(start); i < int(end); i++ {
			v := valueText(c.ListValues(), i)
			switch {
			case c.ListValues().IsNull(i):
				v = "null"
			case c.ListValues().DataType().ID() == arrow.STRING || c.ListValues().DataType().ID() == arrow.LARGE_STRING:
				b, _ := json.Marshal(v)
				v = string(b)
			}
			elems = append(elems, v)
		}
		return "[" + strings.Join(elems, ",") + "]"
	}
	return col.ValueStr(r)
}

// timestampLayout is the canonical text of timestamps in comparisons.
const timestampLayout = "2006-01-02T15:04:05.000000Z"

// IcebergLocation returns the location of an Iceberg target of cfg's sink (a file:// or s3://
// URL), for engines that read the table from its files.
func IcebergLocation(ctx context.Context, cfg *config.Config, target string) (string, error) {
	sink, err := openIceberg(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer sink.Close(context.WithoutCancel(ctx))
	ns, name, _ := strings.Cut(target, ".")
	tbl, err := sink.Catalog().LoadTable(ctx, table.Identifier{ns, name})
	if err != nil {
		return "", fmt.Errorf("loading iceberg table %s: %w", target, err)
	}
	return tbl.Location(), nil
}
