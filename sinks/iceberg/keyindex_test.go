package iceberg

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
)

// planFilesMayExist is the rule the key index replaced, kept as its test oracle: the scan
// planner's answer to whether a live data file's statistics for key column c overlap the key
// range of the selected rows (without a range: whether the table has data).
func planFilesMayExist(ctx context.Context, tbl *table.Table, rec arrow.RecordBatch, rows []bool, c outCol) (bool, error) {
	if tbl.CurrentSnapshot() == nil {
		return false, nil
	}
	opts := []table.ScanOption{}
	if filter, ok := keyRange(rec, rows, c); ok {
		opts = append(opts, table.WithRowFilter(filter))
	}
	tasks, err := tbl.Scan(opts...).PlanFiles(ctx)
	if err != nil {
		return false, fmt.Errorf("planning files: %w", err)
	}
	return len(tasks) > 0, nil
}

// keyCase is a key column type for the key index tests. Key number i (i >= 0) is key(i) in
// Postgres text; order(i) sorts as key i does in the table, and trunc is the length the writer
// truncates its bounds to (0: exact bounds; order is ASCII then). unordered: the index has no
// order for the type, so any data means the keys may exist.
type keyCase struct {
	name      string
	col       batch.Column
	key       func(i int) string
	order     func(i int) string
	trunc     int
	unordered bool
}

// decimal orders integers by their zero-padded text.
func decimal(i int) string { return fmt.Sprintf("%012d", i) }

var keyCases = []keyCase{
	{name: "bigint", col: batch.Column{TypeOID: 20, TypeName: "bigint"},
		key: func(i int) string { return fmt.Sprint(i) }, order: decimal},
	{name: "integer", col: batch.Column{TypeOID: 23, TypeName: "integer"},
		key: func(i int) string { return fmt.Sprint(i) }, order: decimal},
	{name: "smallint", col: batch.Column{TypeOID: 21, TypeName: "smallint"},
		key: func(i int) string { return fmt.Sprint(i) }, order: decimal},
	{name: "text", col: batch.Column{TypeOID: 25, TypeName: "text"},
		key: func(i int) string { return fmt.Sprintf("k%05d", i) }, order: func(i int) string { return fmt.Sprintf("k%05d", i) }},
	// 18 characters: the default metrics mode truncate(16) cuts the bounds to a prefix (lower)
	// and a prefix with its last character incremented (upper), so chunks look wider.
	{name: "text truncated bounds", col: batch.Column{TypeOID: 25, TypeName: "text"},
		key: func(i int) string { return fmt.Sprintf("order-2024-x%06d", i) }, order: func(i int) string { return fmt.Sprintf("order-2024-x%06d", i) }, trunc: 16},
	{name: "date", col: batch.Column{TypeOID: 1082, TypeName: "date"},
		key: func(i int) string { return time.Date(2000, 1, 1+i, 0, 0, 0, 0, time.UTC).Format(time.DateOnly) }, order: decimal},
	{name: "timestamp", col: batch.Column{TypeOID: 1114, TypeName: "timestamp without time zone"},
		key: func(i int) string {
			return time.Date(2024, 1, 1, 0, 0, i, 0, time.UTC).Format(time.DateTime)
		}, order: decimal},
	{name: "uuid (no order)", col: batch.Column{TypeOID: 2950, TypeName: "uuid"},
		key: func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }, order: decimal, unordered: true},
}

// span is a range of key numbers, both ends included.
type span struct{ lo, hi int }

// keyHarness is a harness on a table whose key column is kc's, with one text column.
func keyHarness(t testing.TB, kc keyCase) *harness {
	h := newHarness(t, nil)
	col := kc.col
	col.Name, col.Key, col.NotNull = "k", true, true
	spec := sinks.TableSpec{Target: "raw.keys", Schema: batch.Schema{
		Table:   batch.TableName{Schema: "shop", Name: "keys"},
		Columns: []batch.Column{col, {Name: "v", TypeOID: 25, TypeName: "text"}},
	}}
	if err := h.sink.EnsureTable(t.Context(), spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	h.spec = spec
	return h
}

// snapshotRows is a snapshot-phase batch of kc's keys with the given numbers.
func (h *harness) snapshotRows(kc keyCase, keys ...int) sinks.Batch {
	changes := make([]batch.Change, 0, len(keys))
	for _, i := range keys {
		changes = append(changes, batch.Change{Op: batch.OpSnapshot, Values: []batch.Value{sinktest.Text(kc.key(i)), sinktest.Text("v")}})
	}
	return h.batch(batch.PhaseSnapshot, changes...)
}

// chunk is a snapshot-phase batch of kc's keys s.lo..s.hi.
func (h *harness) chunk(kc keyCase, s span) sinks.Batch {
	var keys []int
	for i := s.lo; i <= s.hi; i++ {
		keys = append(keys, i)
	}
	return h.snapshotRows(kc, keys...)
}

// keyCol is the key column of b's layout.
func keyCol(t testing.TB, b sinks.Batch) outCol {
	l, err := newLayout(b.Spec, b.Record.Schema())
	if err != nil {
		t.Fatalf("newLayout: %v", err)
	}
	return l.keyCols()[0]
}

// expectMayExist is the model's answer: does a committed chunk's [lower bound, upper bound]
// overlap query q, with the bounds truncated as the writer truncates them?
func expectMayExist(kc keyCase, chunks []span, q span) bool {
	lower, upper := kc.order, kc.order
	if kc.trunc > 0 {
		lower = func(i int) string { return kc.order(i)[:kc.trunc] }
		upper = func(i int) string {
			s := kc.order(i)[:kc.trunc]
			return s[:len(s)-1] + string(s[len(s)-1]+1)
		}
	}
	for _, c := range chunks {
		if kc.unordered || lower(c.lo) <= kc.order(q.hi) && upper(c.hi) >= kc.order(q.lo) {
			return true
		}
	}
	return false
}

// TestKeyIndexMatchesScanPlanner commits snapshot chunks of several key types and, before the
// first and after each, asks whether query ranges' keys may exist: the sink's key index (warm,
// as Apply leaves it), a tiny one that keeps evicting, the scan planner (the rule they replace)
// and the model must agree. The queries run concurrently on the shared indexes. Each data
// manifest is read once: the sink's index reads no more manifests than there were commits.
func TestKeyIndexMatchesScanPlanner(t *testing.T) {
	t.Parallel()
	chunks := []span{{1, 100}, {101, 200}, {301, 400}, {150, 250}, {500, 500}, {401, 450}, {260, 299}, {1000, 1099}}
	fixed := map[string]span{
		"first key":                  {1, 1},
		"below every key":            {0, 0},
		"gap 201..299":               {201, 299},
		"gap 251..259":               {251, 259},
		"spans two chunks":           {190, 310},
		"spans the gap's edges":      {250, 260},
		"disjoint, above everything": {5000, 5100},
		"between 500 and 1000":       {501, 999},
	}
	for _, kc := range keyCases {
		t.Run(kc.name, func(t *testing.T) {
			t.Parallel()
			h := keyHarness(t, kc)
			tiny := newKeyIndex(3)
			var committed []span
			check := func(step string, queries map[string]span) {
				t.Helper()
				tbl := h.table()
				type answer struct {
					name                       string
					q                          span
					b                          sinks.Batch
					index, tiny, planner       bool
					indexErr, tinyErr, planErr error
				}
				var answers []*answer
				for name, q := range queries {
					answers = append(answers, &answer{name: name, q: q, b: h.snapshotRows(kc, q.lo, q.hi)})
				}
				var wg sync.WaitGroup
				for _, a := range answers {
					rows := []bool{true, true}
					c := keyCol(t, a.b)
					wg.Go(func() { a.index, a.indexErr = h.sink.keys.keysMayExist(t.Context(), tbl, a.b.Record, rows, c) })
					wg.Go(func() { a.tiny, a.tinyErr = tiny.keysMayExist(t.Context(), tbl, a.b.Record, rows, c) })
					wg.Go(func() { a.planner, a.planErr = planFilesMayExist(t.Context(), tbl, a.b.Record, rows, c) })
				}
				wg.Wait()
				for _, a := range answers {
					if a.indexErr != nil || a.tinyErr != nil || a.planErr != nil {
						t.Fatalf("%s, query %s %v: index: %v, tiny index: %v, planner: %v", step, a.name, a.q, a.indexErr, a.tinyErr, a.planErr)
					}
					want := expectMayExist(kc, committed, a.q)
					if a.index != want || a.tiny != want || a.planner != want {
						t.Errorf("%s, query %s %v: index %v, tiny index %v, planner %v; want %v (chunks %v)",
							step, a.name, a.q, a.index, a.tiny, a.planner, want, committed)
					}
				}
			}
			check("empty table", fixed)
			for n, c := range chunks {
				if err := h.sink.Apply(t.Context(), h.chunk(kc, c)); err != nil {
					t.Fatalf("chunk %v: %v", c, err)
				}
				committed = append(committed, c)
				queries := map[string]span{
					"the new chunk":                  c,
					"inside the new chunk":           {c.lo + (c.hi-c.lo)/3, c.hi - (c.hi-c.lo)/3},
					"ends at the new chunk's first":  {max(c.lo-3, 0), c.lo},
					"starts at the new chunk's last": {c.hi, c.hi + 3},
					"just below the new chunk":       {max(c.lo-3, 0), c.lo - 1},
					"just above the new chunk":       {c.hi + 1, c.hi + 3},
				}
				for name, q := range fixed {
					queries[name] = q
				}
				check(fmt.Sprintf("after chunk %d %v", n+1, c), queries)
			}
			if reads := h.sink.keys.reads.Load(); reads > int64(len(chunks))+2 {
				t.Errorf("the sink's index read %d manifests for %d commits; each manifest should be read once", reads, len(chunks))
			}
		})
	}
}

// TestKeyIndexReadsEachManifestOnce: a backfill of K chunks makes the index read K manifests in
// all, not the K²/2 a scan plan per chunk reads.
func TestKeyIndexReadsEachManifestOnce(t *testing.T) {
	t.Parallel()
	const k = 40
	kc := keyCases[0]
	h := keyHarness(t, kc)
	for n := range k {
		b := h.chunk(kc, span{n*10 + 1, n*10 + 10})
		if err := h.sink.Apply(t.Context(), b); err != nil {
			t.Fatalf("chunk %d: %v", n+1, err)
		}
		// Apply read the manifests of the chunks before this one.
		if reads := h.sink.keys.reads.Load(); reads > int64(n)+1 {
			t.Fatalf("after %d chunks the index read %d manifests, want at most %d", n+1, reads, n+1)
		}
	}
	if data, eq := h.fileCounts(); data != k || eq != 0 {
		t.Errorf("%d data files and %d equality delete files, want %d and none (every chunk appends)", data, eq, k)
	}
}

// BenchmarkKeysMayExist commits chunks chunks of 10 rows and, before each, times the question
// Apply asks about the chunk's keys: the scan planner's way (every manifest, every time) and
// the key index's (the new manifests only); ns/op is the index's time for the whole backfill.
// Run it with -benchtime=1x: one run is the whole backfill.
func BenchmarkKeysMayExist(b *testing.B) {
	const chunks = 300
	kc := keyCases[0]
	b.StopTimer()
	for range b.N {
		h := keyHarness(b, kc)
		ix := newKeyIndex(keyIndexSize)
		var planner, index time.Duration
		for n := range chunks {
			cb := h.chunk(kc, span{n*10 + 1, n*10 + 10})
			tbl, c := h.table(), keyCol(b, cb)
			rows := make([]bool, cb.Record.NumRows())
			for i := range rows {
				rows[i] = true
			}
			start := time.Now()
			old, err := planFilesMayExist(b.Context(), tbl, cb.Record, rows, c)
			planner += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start = time.Now()
			got, err := ix.keysMayExist(b.Context(), tbl, cb.Record, rows, c)
			index += time.Since(start)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if got || old {
				b.Fatalf("chunk %d: index %v, planner %v; want false", n+1, got, old)
			}
			if err := h.sink.Apply(b.Context(), cb); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(planner.Milliseconds()), "planner-ms/backfill")
		b.ReportMetric(float64(index.Milliseconds()), "index-ms/backfill")
		b.ReportMetric(float64(ix.reads.Load()), "index-manifest-reads/backfill")
	}
}

// TestKeyIndexAfterKeyWidening: an int key widened to bigint keeps its old files' 4-byte bounds,
// which the index reads as the int they were (iceberg-go's planner rejects them: "expected 8
// bytes for int64 value, got 4"), so snapshot chunks after the widening still apply.
func TestKeyIndexAfterKeyWidening(t *testing.T) {
	t.Parallel()
	kc := keyCases[1] // integer
	h := keyHarness(t, kc)
	if err := h.sink.Apply(t.Context(), h.chunk(kc, span{1, 100})); err != nil {
		t.Fatalf("chunk before widening: %v", err)
	}
	spec := h.spec
	spec.Schema.Columns = slices.Clone(spec.Schema.Columns)
	spec.Schema.Columns[0].TypeOID, spec.Schema.Columns[0].TypeName = 20, "bigint"
	if err := h.sink.EnsureTable(t.Context(), spec); err != nil {
		t.Fatalf("EnsureTable widening the key: %v", err)
	}
	h.spec = spec
	for _, q := range []struct {
		q    span
		want bool
	}{{span{50, 60}, true}, {span{100, 105}, true}, {span{101, 200}, false}} {
		b := h.snapshotRows(kc, q.q.lo, q.q.hi)
		got, err := newKeyIndex(8).keysMayExist(t.Context(), h.table(), b.Record, []bool{true, true}, keyCol(t, b))
		if err != nil || got != q.want {
			t.Errorf("keys %v after widening: %v, %v; want %v", q.q, got, err, q.want)
		}
	}
	if err := h.sink.Apply(t.Context(), h.chunk(kc, span{101, 200})); err != nil {
		t.Fatalf("chunk after widening: %v", err)
	}
	if data, eq := h.fileCounts(); data != 2 || eq != 0 {
		t.Errorf("%d data and %d equality delete files, want 2 and none", data, eq)
	}
}
