package iceberg

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// readOps returns each row's operation from the __op column, which may carry the names
// (insert, update, delete, snapshot-read) or the numeric batch.Op values.
func readOps(rec arrow.RecordBatch, tbl string) ([]batch.Op, error) {
	idx := rec.Schema().FieldIndices(opColumn)
	if len(idx) != 1 {
		return nil, sinks.Poisonf("table %s: the batch has no %s column", tbl, opColumn)
	}
	col := rec.Column(idx[0])
	ops := make([]batch.Op, col.Len())
	byName := map[string]batch.Op{}
	for _, o := range []batch.Op{batch.OpInsert, batch.OpUpdate, batch.OpDelete, batch.OpSnapshot} {
		byName[o.String()] = o
	}
	fromName := func(i int, s string) error {
		o, ok := byName[s]
		if !ok {
			return sinks.Poisonf("table %s: row %d has unknown operation %q in %s", tbl, i, s, opColumn)
		}
		ops[i] = o
		return nil
	}
	for i := range ops {
		if col.IsNull(i) {
			return nil, sinks.Poisonf("table %s: row %d has a NULL %s", tbl, i, opColumn)
		}
		var err error
		switch c := col.(type) {
		case *array.String:
			err = fromName(i, c.Value(i))
		case *array.LargeString:
			err = fromName(i, c.Value(i))
		case *array.Dictionary:
			s, ok := c.Dictionary().(*array.String)
			if !ok {
				return nil, sinks.Poisonf("table %s: %s is a dictionary of %s, want strings", tbl, opColumn, c.Dictionary().DataType())
			}
			err = fromName(i, s.Value(c.GetValueIndex(i)))
		case *array.Uint8:
			ops[i] = batch.Op(c.Value(i))
		case *array.Int8:
			ops[i] = batch.Op(c.Value(i))
		case *array.Int16:
			ops[i] = batch.Op(c.Value(i))
		case *array.Int32:
			ops[i] = batch.Op(c.Value(i))
		default:
			return nil, sinks.Poisonf("table %s: %s has type %s, want a string or an integer", tbl, opColumn, col.DataType())
		}
		if err != nil {
			return nil, err
		}
		if ops[i] < batch.OpInsert || ops[i] > batch.OpSnapshot {
			return nil, sinks.Poisonf("table %s: row %d has unknown operation %d in %s", tbl, i, ops[i], opColumn)
		}
	}
	return ops, nil
}

// project returns the rows of rec selected by keep, with the columns cols named and numbered as in
// the Iceberg schema sc. The caller releases the result.
func project(ctx context.Context, rec arrow.RecordBatch, keep []bool, cols []outCol, sc *iceberg.Schema) (arrow.RecordBatch, error) {
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		f, err := withFieldIDs(c, sc)
		if err != nil {
			return nil, err
		}
		fields[i] = f
		col := rec.Column(rec.Schema().FieldIndices(c.src)[0])
		if c.asText {
			arrs[i] = intervalColumnAsText(col, f.Type)
		} else {
			arrs[i] = retype(col, f.Type)
		}
		defer arrs[i].Release()
	}
	all := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, rec.NumRows())
	if !slices.Contains(keep, false) {
		// Every row is kept (a backfill chunk, a batch of inserts): the columns as they are, not
		// a copy of each made by the filter.
		return all, nil
	}
	defer all.Release()

	b := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(keep, nil)
	mask := b.NewBooleanArray()
	defer mask.Release()
	out, err := compute.FilterRecordBatch(ctx, all, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("selecting rows: %w", err)
	}
	return out, nil
}

// retype returns a reference to arr's data under dt, an equal type that differs only in the
// metadata of nested fields. The caller releases it.
func retype(arr arrow.Array, dt arrow.DataType) arrow.Array {
	d := arr.Data()
	nd := array.NewData(dt, d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd)
}

// one yields a single record batch. WriteRecords releases what it consumes, so it gets its own
// reference.
func one(rec arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		rec.Retain()
		yield(rec, nil)
	}
}

// all yields the record batches, each with its own reference (see one).
func all(recs []arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for _, rec := range recs {
			rec.Retain()
			if !yield(rec, nil) {
				return
			}
		}
	}
}

// checkKeysNotNull rejects rows whose key columns are NULL: they cannot be upserted or deleted.
func checkKeysNotNull(rec arrow.RecordBatch, l layout) error {
	for _, c := range l.keyCols() {
		col := rec.Column(rec.Schema().FieldIndices(c.src)[0])
		if n := col.NullN(); n > 0 {
			return sinks.Poisonf("table %s: %d row(s) have a NULL key column %s; key columns must be set "+
				"on every row (check the table's replica identity and key configuration)", l.table, n, c.name)
		}
	}
	return nil
}

// keyRange returns a filter matching every value of column c between the smallest and the largest
// value among the selected rows; ok is false for key types it cannot express (the caller then
// assumes the keys may be present).
func keyRange(rec arrow.RecordBatch, keep []bool, c outCol) (iceberg.BooleanExpression, bool) {
	s, ok := keySpanOf(rec, keep, c)
	return s.filter, ok
}

// keySpan is the smallest and the largest value of a key column among a batch's selected rows:
// as a filter for the scan planner, and as the values the key index compares (keyindex.go).
type keySpan struct {
	filter iceberg.BooleanExpression // lo <= column <= hi
	kind   keyKind
	lo, hi keyValue
}

// keySpanOf returns the span of column c among the rows selected by keep; ok is false for key
// types it cannot express and when no row is selected.
func keySpanOf(rec arrow.RecordBatch, keep []bool, c outCol) (keySpan, bool) {
	col := rec.Column(rec.Schema().FieldIndices(c.src)[0])
	ref := iceberg.Reference(c.name)
	switch a := col.(type) {
	case *array.Int16:
		lo, hi, ok := minMax(keep, a.Value)
		return intSpan(ref, int32(lo), int32(hi)), ok
	case *array.Int32:
		lo, hi, ok := minMax(keep, a.Value)
		return intSpan(ref, lo, hi), ok
	case *array.Int64:
		lo, hi, ok := minMax(keep, a.Value)
		return intSpan(ref, lo, hi), ok
	case *array.String:
		lo, hi, ok := minMax(keep, a.Value)
		return stringSpan(ref, lo, hi), ok
	case *array.LargeString:
		lo, hi, ok := minMax(keep, a.Value)
		return stringSpan(ref, lo, hi), ok
	case *array.Date32:
		lo, hi, ok := minMax(keep, func(i int) int32 { return int32(a.Value(i)) })
		return intSpan(ref, iceberg.Date(lo), iceberg.Date(hi)), ok
	case *array.Timestamp:
		if a.DataType().(*arrow.TimestampType).Unit != arrow.Microsecond {
			return keySpan{}, false
		}
		lo, hi, ok := minMax(keep, func(i int) int64 { return int64(a.Value(i)) })
		return intSpan(ref, iceberg.Timestamp(lo), iceberg.Timestamp(hi)), ok
	}
	return keySpan{}, false
}

// intSpan is the span [lo, hi] of an integer-like key (int, long, date, timestamp).
func intSpan[T int32 | int64 | iceberg.Date | iceberg.Timestamp](ref iceberg.Reference, lo, hi T) keySpan {
	return keySpan{filter: between(ref, lo, hi), kind: kindInt, lo: keyValue{n: int64(lo)}, hi: keyValue{n: int64(hi)}}
}

// stringSpan is the span [lo, hi] of a string key.
func stringSpan(ref iceberg.Reference, lo, hi string) keySpan {
	return keySpan{filter: between(ref, lo, hi), kind: kindString, lo: keyValue{s: lo}, hi: keyValue{s: hi}}
}

// between is the filter lo <= ref <= hi.
func between[T iceberg.LiteralType](ref iceberg.Reference, lo, hi T) iceberg.BooleanExpression {
	return iceberg.NewAnd(iceberg.GreaterThanEqual(ref, lo), iceberg.LessThanEqual(ref, hi))
}

// minMax returns the smallest and the largest value(i) among the rows selected by keep; ok is false
// when none is.
func minMax[T cmp.Ordered](keep []bool, value func(int) T) (lo, hi T, ok bool) {
	for i, k := range keep {
		if !k {
			continue
		}
		v := value(i)
		if !ok || v < lo {
			lo = v
		}
		if !ok || v > hi {
			hi = v
		}
		ok = true
	}
	return lo, hi, ok
}

// intervalsAsText returns the intervals of arr as their ISO 8601 text (batch.AppendInterval),
// NULLs kept. The caller releases it.
func intervalsAsText(arr *array.MonthDayNanoInterval) arrow.Array {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(arr.Len())
	var buf []byte
	for i := range arr.Len() {
		if arr.IsNull(i) {
			b.AppendNull()
			continue
		}
		buf = batch.AppendInterval(buf[:0], arr.Value(i))
		b.Append(string(buf))
	}
	return b.NewArray()
}

// intervalColumnAsText returns an interval column, or a list of intervals column, as its text
// under dt (string, or a list of strings with the list's own offsets and NULLs). The caller
// releases it.
func intervalColumnAsText(col arrow.Array, dt arrow.DataType) arrow.Array {
	switch c := col.(type) {
	case *array.MonthDayNanoInterval:
		return intervalsAsText(c)
	case *array.List:
		elems := intervalsAsText(c.ListValues().(*array.MonthDayNanoInterval))
		defer elems.Release()
		d := c.Data()
		nd := array.NewData(dt, d.Len(), d.Buffers(), []arrow.ArrayData{elems.Data()}, d.NullN(), d.Offset())
		defer nd.Release()
		return array.MakeFromData(nd)
	}
	panic(fmt.Sprintf("intervalColumnAsText: %s is no interval column", col.DataType()))
}
