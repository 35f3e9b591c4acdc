package workload

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/sinks/iceberg"
)

// IcebergSink reads Iceberg targets of a pipeline's sink with deletes applied, as a query
// engine would. Every type maps exactly (decimal, timestamp[us], time64[us], binary, uuid,
// lists), so Expect changes nothing.
type IcebergSink struct {
	Config *config.Config
	// Target maps a workload table name to its Iceberg target (namespace.table).
	Target func(table string) string
}

// Name implements Sink.
func (s IcebergSink) Name() string { return "iceberg" }

// Expect implements Sink: Iceberg holds every workload value exactly.
func (s IcebergSink) Expect(_ Column, v string) string { return v }

// Read implements Sink.
func (s IcebergSink) Read(ctx context.Context, t *Table, _ []Key) ([]Row, error) {
	opened, err := pipeline.Open(ctx, s.Config, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer opened.Close(context.WithoutCancel(ctx))
	sink, ok := opened.(*iceberg.Sink)
	if !ok {
		return nil, fmt.Errorf("sink %s is not iceberg", s.Config.Sink.Type)
	}
	target := s.Target(t.Name)
	ns, name, _ := strings.Cut(target, ".")
	tbl, err := sink.Catalog().LoadTable(ctx, table.Identifier{ns, name})
	if err != nil {
		return nil, fmt.Errorf("loading iceberg table %s: %w", target, err)
	}
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = c.Name
	}
	_, itr, err := tbl.Scan(table.WithSelectedFields(cols...)).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scanning %s: %w", target, err)
	}
	var out []Row
	for rec, err := range itr {
		if err != nil {
			return nil, fmt.Errorf("scanning %s: %w", target, err)
		}
		idx := make([]int, len(cols))
		for i, c := range cols {
			f := rec.Schema().FieldIndices(c)
			if len(f) != 1 {
				rec.Release()
				return nil, fmt.Errorf("scanning %s: no column %s", target, c)
			}
			idx[i] = f[0]
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			vals := make([]string, len(cols))
			for i := range cols {
				vals[i] = arrowText(rec.Column(idx[i]), r)
			}
			out = append(out, t.row(vals))
		}
		rec.Release()
	}
	return out, nil
}

// arrowText prints an Arrow value in a form Canon reads.
func arrowText(col arrow.Array, r int) string {
	if col.IsNull(r) {
		return Null
	}
	switch c := col.(type) {
	case *array.Decimal128:
		return c.Value(r).ToString(c.DataType().(*arrow.Decimal128Type).Scale)
	case *array.Timestamp:
		return c.Value(r).ToTime(c.DataType().(*arrow.TimestampType).Unit).UTC().Format(TimestampLayout)
	case *array.Time64:
		return c.Value(r).ToTime(c.DataType().(*arrow.Time64Type).Unit).Format(timeLayout)
	case *array.Date32:
		return c.Value(r).ToTime().Format(time.DateOnly)
	case *array.Binary:
		return hex.EncodeToString(c.Value(r))
	case *array.LargeBinary:
		return hex.EncodeToString(c.Value(r))
	case *extensions.UUIDArray:
		return c.Value(r).String()
	case *array.FixedSizeBinary:
		return formatUUID(c.Value(r))
	case *array.String:
		return c.Value(r)
	case *array.LargeString:
		return c.Value(r)
	case array.ListLike:
		start, end := c.ValueOffsets(r)
		elems := make([]any, 0, end-start)
		for i := int(start); i < int(end); i++ {
			v := c.ListValues()
			switch {
			case v.IsNull(i):
				elems = append(elems, nil)
			case v.DataType().ID() == arrow.STRING || v.DataType().ID() == arrow.LARGE_STRING:
				elems = append(elems, arrowText(v, i))
			default:
				elems = append(elems, json.Number(arrowText(v, i)))
			}
		}
		b, err := json.Marshal(elems)
		if err != nil {
			return fmt.Sprintf("unprintable list: %v", err)
		}
		return string(b)
	}
	return col.ValueStr(r)
}

// formatUUID prints 16 bytes as a UUID (other lengths as hex).
func formatUUID(b []byte) string {
	h := hex.EncodeToString(b)
	if len(b) != 16 {
		return h
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
