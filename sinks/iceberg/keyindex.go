package iceberg

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
)

// keyIndexSize is how many manifests the key index of a sink remembers.
const keyIndexSize = 4096

// keyIndexReaders is how many manifests the key index reads at once.
const keyIndexReaders = 8

// keyKind is how key values compare: as integers (int, long, date, timestamp) or as strings.
type keyKind int

const (
	kindNone   keyKind = iota // a type the index has no order for
	kindInt                   // int, long, date, timestamp, timestamptz: keyValue.n
	kindString                // string: keyValue.s
)

// keyValue is one value of a key column: n for kindInt, s for kindString.
type keyValue struct {
	n int64
	s string
}

// compare orders a and b as values of kind k.
func (k keyKind) compare(a, b keyValue) int {
	if k == kindString {
		return strings.Compare(a.s, b.s)
	}
	return cmp.Compare(a.n, b.n)
}

// kindOf is the kind of the values of Iceberg type t.
func kindOf(t iceberg.Type) keyKind {
	switch t.(type) {
	case iceberg.Int32Type, iceberg.Int64Type, iceberg.DateType, iceberg.TimestampType, iceberg.TimestampTzType:
		return kindInt
	case iceberg.StringType:
		return kindString
	}
	return kindNone
}

// fileBounds are the statistics of one live data file for the key column: every key in the file
// is >= lo when hasLo and <= hi when hasHi. A file without bounds may hold any key.
type fileBounds struct {
	lo, hi       keyValue
	hasLo, hasHi bool
}

// overlaps reports whether a file with bounds b may hold a key in [lo, hi]: the test the scan
// planner's inclusive metrics evaluator makes for lo <= key AND key <= hi (a truncated string
// bound is still a bound, so the comparison stays conservative).
func (b fileBounds) overlaps(k keyKind, lo, hi keyValue) bool {
	return (!b.hasLo || k.compare(b.lo, hi) <= 0) && (!b.hasHi || k.compare(b.hi, lo) >= 0)
}

// manifestKeys is what one data manifest says about the key column of its live data files.
type manifestKeys struct {
	rows  bool         // some live data file has rows
	files []fileBounds // the bounds of each live data file that has a non-NULL key
}

// manifestKey names a manifest's entry in the index: a manifest path is a full URI and a manifest
// never changes once written, and the field and its type say how its bounds were decoded.
type manifestKey struct {
	path  string
	field int
	typ   string
}

// keyOf is the index's key for manifest m and field.
func keyOf(m iceberg.ManifestFile, field iceberg.NestedField) manifestKey {
	return manifestKey{path: m.FilePath(), field: field.ID, typ: field.Type.String()}
}

// keyIndex remembers, per manifest, the key column bounds of its live data files, so that
// deciding whether a backfill chunk's keys may already be in a table reads only the manifests
// written since the last decision instead of every manifest of the table. It is safe for
// concurrent use, and bounded: it forgets the least recently used manifests.
type keyIndex struct {
	manifests *lru.Cache[manifestKey, manifestKeys]
	reading   singleflight.Group // manifests being read, by manifestKey
	reads     atomic.Int64       // manifests read, for tests
}

// newKeyIndex returns an index remembering up to size manifests.
func newKeyIndex(size int) *keyIndex {
	c, err := lru.New[manifestKey, manifestKeys](size)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &keyIndex{manifests: c}
}

// keysMayExist reports whether tbl (its current snapshot) may hold a key of column c among the
// rows of rec selected by rows: whether a live data file's statistics for c overlap the rows'
// key range. Without a usable range (a key type the index has no order for) it answers yes
// whenever the table has a data file with rows. Delete files are ignored: a key that a delete
// removed still counts as present, which only costs an unneeded equality delete.
func (ix *keyIndex) keysMayExist(ctx context.Context, tbl *table.Table, rec arrow.RecordBatch, rows []bool, c outCol) (bool, error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return false, nil
	}
	field, ok := tbl.Schema().FindFieldByName(c.name)
	if !ok {
		return false, fmt.Errorf("key column %s is not in the table schema", c.name)
	}
	kind := kindOf(field.Type)
	span, ranged := keySpanOf(rec, rows, c)
	ranged = ranged && kind != kindNone && span.kind == kind
	fs, err := tbl.FS(ctx)
	if err != nil {
		return false, fmt.Errorf("opening the table's file system: %w", err)
	}
	list, err := snap.Manifests(fs)
	if err != nil {
		return false, fmt.Errorf("reading manifest list %s: %w", snap.ManifestList, err)
	}
	mayHold := func(m manifestKeys) bool {
		if !ranged {
			return m.rows
		}
		for _, f := range m.files {
			if f.overlaps(kind, span.lo, span.hi) {
				return true
			}
		}
		return false
	}
	// The manifests seen before first: an overlap there spares reading the new ones.
	var missing []iceberg.ManifestFile
	for _, m := range list {
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		keys, ok := ix.manifests.Get(keyOf(m, field))
		if !ok {
			missing = append(missing, m)
			continue
		}
		if mayHold(keys) {
			return true, nil
		}
	}
	read := make([]manifestKeys, len(missing))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(keyIndexReaders)
	for i, m := range missing {
		g.Go(func() error {
			keys, err := ix.manifest(gctx, fs, m, field)
			read[i] = keys
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return false, err
	}
	for _, keys := range read {
		if mayHold(keys) {
			return true, nil
		}
	}
	return false, nil
}

// manifest returns what manifest m says about field, reading it unless the index has it (its
// caller found it missing; a concurrent call may have read it since). Concurrent callers missing
// the same manifest share one read.
func (ix *keyIndex) manifest(ctx context.Context, fs iceio.IO, m iceberg.ManifestFile, field iceberg.NestedField) (manifestKeys, error) {
	key := keyOf(m, field)
	v, err, _ := ix.reading.Do(fmt.Sprintf("%d %s %s", key.field, key.typ, key.path), func() (any, error) {
		if keys, ok := ix.manifests.Get(key); ok {
			return keys, nil
		}
		keys, err := ix.read(ctx, fs, m, field)
		if err != nil {
			return manifestKeys{}, err
		}
		ix.manifests.Add(key, keys)
		return keys, nil
	})
	if err != nil {
		return manifestKeys{}, err
	}
	return v.(manifestKeys), nil
}

// read reads the live data files of manifest m and their bounds for field. Files without rows,
// and files whose key is NULL in every row, can hold no key (the scan planner skips them too).
func (ix *keyIndex) read(ctx context.Context, fs iceio.IO, m iceberg.ManifestFile, field iceberg.NestedField) (manifestKeys, error) {
	ix.reads.Add(1)
	kind := kindOf(field.Type)
	var out manifestKeys
	for e, err := range m.Entries(fs, true) {
		if err != nil {
			return manifestKeys{}, fmt.Errorf("reading manifest %s: %w", m.FilePath(), err)
		}
		if err := ctx.Err(); err != nil {
			return manifestKeys{}, fmt.Errorf("reading manifest %s: %w", m.FilePath(), err)
		}
		df := e.DataFile()
		if df.ContentType() != iceberg.EntryContentData || df.Count() == 0 {
			continue
		}
		out.rows = true
		values, hasValues := df.ValueCounts()[field.ID]
		nulls, hasNulls := df.NullValueCounts()[field.ID]
		if hasValues && hasNulls && values == nulls {
			continue
		}
		var b fileBounds
		b.lo, b.hasLo = boundOf(field.Type, kind, df.LowerBoundValues()[field.ID])
		b.hi, b.hasHi = boundOf(field.Type, kind, df.UpperBoundValues()[field.ID])
		out.files = append(out.files, b)
	}
	return out, nil
}

// boundOf decodes a single-value bound of a field of type t and kind k; ok is false when it
// cannot (no bound, or bytes the type does not read), and the file then has no such bound.
func boundOf(t iceberg.Type, k keyKind, b []byte) (keyValue, bool) {
	if b == nil || k == kindNone {
		return keyValue{}, false
	}
	if _, long := t.(iceberg.Int64Type); long && len(b) == 4 {
		// Written while the column was an int (a promoted column keeps its old files' bounds).
		return keyValue{n: int64(int32(binary.LittleEndian.Uint32(b)))}, true
	}
	lit, err := iceberg.LiteralFromBytes(t, b)
	if err != nil {
		return keyValue{}, false
	}
	switch v := lit.(type) {
	case iceberg.Int32Literal:
		return keyValue{n: int64(v)}, true
	case iceberg.Int64Literal:
		return keyValue{n: int64(v)}, true
	case iceberg.DateLiteral:
		return keyValue{n: int64(v)}, true
	case iceberg.TimestampLiteral:
		return keyValue{n: int64(v)}, true
	case iceberg.StringLiteral:
		return keyValue{s: strings.Clone(string(v))}, true // the literal shares b
	}
	return keyValue{}, false
}
