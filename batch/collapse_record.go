package batch

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// CollapseRecord applies last-write-wins per key to the rows of a batch record whose rows are in
// change order (the rows of consecutive staged batches, concatenated in position order): it keeps
// the last row of every key and drops the earlier ones, keeping the kept rows in their order, and
// returns how many rows it dropped. Every row of a staged batch is a whole image (the reader's
// Collapser resolved unchanged values and split key changes), so the last row of a key is its
// state after the whole record: an upsert, or a delete carrying the key, which is kept. keys are
// the indexes of the key columns (Schema.KeyIndexes); keys compare by their Arrow value (the
// string form of ValueStr, NULL apart from any value). The caller releases the result and still
// owns rec; mem allocates the result when rows are dropped.
func CollapseRecord(mem memory.Allocator, rec arrow.RecordBatch, keys []int) (arrow.RecordBatch, int64, error) {
	if len(keys) == 0 {
		return nil, 0, fmt.Errorf("collapsing a record: the table has no key column")
	}
	for _, k := range keys {
		if k < 0 || k >= int(rec.NumCols())-NumContextColumns {
			return nil, 0, fmt.Errorf("collapsing a record: key column %d is not a data column of a record of %d columns", k, rec.NumCols())
		}
	}
	n := int(rec.NumRows())
	last := make(map[string]int, n)
	var enc []byte
	for i := range n {
		enc = enc[:0]
		for _, k := range keys {
			col := rec.Column(k)
			if col.IsNull(i) {
				enc = append(enc, 0)
				continue
			}
			v := col.ValueStr(i)
			enc = append(enc, 1)
			enc = binary.AppendUvarint(enc, uint64(len(v)))
			enc = append(enc, v...)
		}
		last[string(enc)] = i
	}
	if len(last) == n {
		rec.Retain()
		return rec, 0, nil
	}
	keep := make([]bool, n)
	for _, i := range last {
		keep[i] = true
	}
	// Kept rows usually form long runs (keys repeat rarely): slice runs, then concatenate.
	var runs []arrow.RecordBatch
	defer func() {
		for _, r := range runs {
			r.Release()
		}
	}()
	start := -1
	for i := 0; i <= n; i++ {
		k := i < n && keep[i]
		switch {
		case k && start < 0:
			start = i
		case !k && start >= 0:
			runs = append(runs, rec.NewSlice(int64(start), int64(i)))
			start = -1
		}
	}
	out, err := concatRecords(mem, rec.Schema(), runs)
	if err != nil {
		return nil, 0, fmt.Errorf("collapsing a record: %w", err)
	}
	return out, int64(n - len(last)), nil
}

// ConcatRecords returns one record holding the rows of recs in order. They must have the same
// fields (names and types; schema metadata may differ): the result has the first one's schema.
// The caller releases the result and still owns recs.
func ConcatRecords(mem memory.Allocator, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("concatenating records: none given")
	}
	schema := recs[0].Schema()
	for i, r := range recs[1:] {
		if !sameFields(schema, r.Schema()) {
			return nil, fmt.Errorf("concatenating records: record %d has fields %s, record 0 has %s", i+1, r.Schema(), schema)
		}
	}
	return concatRecords(mem, schema, recs)
}

// sameFields reports whether a and b have the same fields, ignoring schema metadata.
func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Nullable != fb.Nullable || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}
