package clickhouse

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// image is one row of typesSpec's table: the Postgres text of each column after the keys (nil
// for NULL) and what toString of its ClickHouse column must show for it (hex for blob).
type image struct {
	name string
	pg   []*string // small ... nums, in typesSpec order
	want []*string // the same columns as ClickHouse 26.7 prints them
}

func s(v string) *string { return &v }

// pair builds an image from (Postgres text, ClickHouse text) pairs; a nil Postgres text is
// NULL, shown as want.
func pair(name string, kv ...*string) image {
	im := image{name: name}
	for i := 0; i < len(kv); i += 2 {
		im.pg, im.want = append(im.pg, kv[i]), append(im.want, kv[i+1])
	}
	return im
}

// The images of the workload. low and high hold the extremes of every type (Date32 and
// DateTime64 at both ends of what the sink accepts, dates before 1970 and after 2106,
// microseconds), mid the ordinary values between, null a row with every nullable column NULL.
var (
	low = pair("low",
		s("-32768"), s("-32768"), s("-2147483648"), s("-2147483648"), s("-0.5"), s("-0.5"), s("-1e-300"), s("-1e-300"),
		s("-9999999999.99"), s("-9999999999.99"), s("-0.000000001"), s("-0.000000001"), s("f"), s("false"),
		s(`{"k": "v"}`), s(`{"k": "v"}`), s(`\x00ff`), s("00FF"),
		s("00000000-0000-0000-0000-000000000000"), s("00000000-0000-0000-0000-000000000000"),
		s("1900-01-01"), s("1900-01-01"),
		s("1900-01-01 00:00:00"), s("1900-01-01 00:00:00.000000"),
		s("1969-12-31 23:59:59.999999+00"), s("1969-12-31 23:59:59.999999"),
		s("00:00:00"), s("00:00:00"), s("3 days"), s("P3D"),
		s(`{"a b",NULL,""}`), s("['a b',NULL,'']"), s("{-2147483648,NULL}"), s("[-2147483648,NULL]"))
	high = pair("high",
		s("32767"), s("32767"), s("2147483647"), s("2147483647"), s("3.25"), s("3.25"), s("1e+300"), s("1e300"),
		s("9999999999.99"), s("9999999999.99"), s("123456789012345678901234567890.5"), s("123456789012345678901234567890.5"),
		s("t"), s("true"), s("[1, 2]"), s("[1, 2]"), s(`\x`), s(""),
		s("ffffffff-ffff-ffff-ffff-ffffffffffff"), s("ffffffff-ffff-ffff-ffff-ffffffffffff"),
		s("2299-12-31"), s("2299-12-31"),
		s("2262-04-11 23:47:16"), s("2262-04-11 23:47:16.000000"),
		s("2200-01-01 12:34:56.789012+00"), s("2200-01-01 12:34:56.789012"),
		s("23:59:59.999999"), s("23:59:59.999999"), s("1 year 2 mons 3 days 04:05:06.5"), s("P1Y2M3DT4H5M6.5S"),
		s("{}"), s("[]"), s("{2147483647}"), s("[2147483647]"))
	mid = pair("mid",
		s("7"), s("7"), s("42"), s("42"), s("1.5"), s("1.5"), s("2.25"), s("2.25"),
		s("12.34"), s("12.34"), s("0.1"), s("0.1"), s("t"), s("true"),
		s(`{}`), s(`{}`), s(`\x0102`), s("0102"),
		s("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), s("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
		s("1969-12-31"), s("1969-12-31"),
		s("1969-12-31 23:59:59.999999"), s("1969-12-31 23:59:59.999999"),
		s("2150-06-07 08:09:10.000001+00"), s("2150-06-07 08:09:10.000001"),
		s("12:34:56.5"), s("12:34:56.5"), s("00:00:01"), s("PT1S"),
		s(`{x}`), s("['x']"), s("{1,2,3}"), s("[1,2,3]"))
	after2106 = pair("after2106",
		s("1"), s("1"), s("2"), s("2"), s("0"), s("0"), s("0"), s("0"),
		s("0.00"), s("0"), s("0"), s("0"), s("f"), s("false"),
		s(`null`), s(`null`), s(`\x41`), s("41"),
		s("6ba7b811-9dad-11d1-80b4-00c04fd430c8"), s("6ba7b811-9dad-11d1-80b4-00c04fd430c8"),
		s("2150-06-07"), s("2150-06-07"),
		s("2106-02-07 06:28:16"), s("2106-02-07 06:28:16.000000"),
		s("1970-01-01 00:00:00+00"), s("1970-01-01 00:00:00.000000"),
		s("00:00:00.000001"), s("00:00:00.000001"), s("-1 days"), s("P-1D"),
		s(`{NULL}`), s("[NULL]"), s("{0}"), s("[0]"))
	null = pair("null",
		nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
		nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, s("[]"), nil, s("[]"))
)

// rowKey is the key of typesSpec's table.
type rowKey struct {
	id     int64
	region string
}

func (k rowKey) String() string { return fmt.Sprintf("(%d, %s)", k.id, k.region) }

// modernWorkload applies changes of typesSpec's table and keeps the rows the table must show:
// every column, the metadata columns included, as toString prints them.
type modernWorkload struct {
	t     *testing.T
	spec  sinks.TableSpec
	lsn   uint64
	model map[rowKey][]*string
	last  batch.SourcePosition
}

// commitTS is the commit time of every streamed change: microseconds, to check committed_at.
var commitTS = time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)

func (w *modernWorkload) change(op batch.Op, k rowKey, im image) batch.Change {
	vals := []batch.Value{sinktest.Text(fmt.Sprint(k.id)), sinktest.Text(k.region)}
	for _, v := range im.pg {
		if v == nil {
			vals = append(vals, batch.Value{Null: true})
			continue
		}
		vals = append(vals, sinktest.Text(*v))
	}
	return batch.Change{Op: op, Values: vals}
}

func (w *modernWorkload) upsert(op batch.Op, k rowKey, im image) batch.Change {
	return w.change(op, k, im)
}

func (w *modernWorkload) delete(k rowKey) batch.Change {
	c := w.change(batch.OpDelete, k, null)
	for i := 2; i < len(c.Values); i++ {
		c.Values[i] = batch.Value{Null: true}
	}
	return c
}

// rekey moves old's row to k with image im.
func (w *modernWorkload) rekey(old, k rowKey, im image) batch.Change {
	c := w.change(batch.OpUpdate, k, im)
	c.OldKey = w.delete(old).Values
	return c
}

// batch builds the next batch as the pipeline does (positions, collapse, record) and, unless
// stale, folds it into the model. A stale batch is built with positions below the next one's:
// an attempt that a newer commit overtakes.
func (w *modernWorkload) batch(phase batch.Phase, changes ...batch.Change) sinks.Batch {
	w.t.Helper()
	w.lsn += 0x100
	for i := range changes {
		changes[i].Pos = batch.Position{LSN: w.lsn, Seq: uint32(i)}
		if phase != batch.PhaseSnapshot {
			changes[i].CommitTS = commitTS
		}
	}
	col, err := batch.NewCollapser(w.spec.Schema)
	if err != nil {
		w.t.Fatal(err)
	}
	collapsed, err := col.Collapse(changes)
	if err != nil {
		w.t.Fatalf("Collapse: %v", err)
	}
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, w.spec.Schema)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rb.Release()
	rec, err := rb.Build(collapsed, time.Now())
	if err != nil {
		w.t.Fatalf("Build: %v", err)
	}
	w.t.Cleanup(rec.Release)
	b := sinks.Batch{Spec: w.spec, Phase: phase, Record: rec,
		Lo: batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: w.lsn}},
		Hi: batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: w.lsn, Seq: uint32(len(changes) - 1)}}}
	if phase == batch.PhaseSnapshot {
		b.Lo, b.Hi = batch.SourcePosition{}, batch.SourcePosition{}
	}
	return b
}

// expect folds changes, in order, into the model: the row of each key as the table must show it.
func (w *modernWorkload) expect(changes []batch.Change, images map[string]image) {
	for _, c := range changes {
		if c.OldKey != nil {
			delete(w.model, rowKey{id: atoi(c.OldKey[0]), region: string(c.OldKey[1].Text)})
		}
		k := rowKey{id: atoi(c.Values[0]), region: string(c.Values[1].Text)}
		if c.Op == batch.OpDelete {
			delete(w.model, k)
			continue
		}
		im := images[imageOf(c)]
		row := append([]*string(nil), im.want...)
		committed := (*string)(nil)
		if c.Op != batch.OpSnapshot {
			committed = s(commitTS.Format("2006-01-02 15:04:05.000000"))
		}
		w.model[k] = append(row, committed, s(c.Op.String()))
	}
}

func atoi(v batch.Value) int64 {
	var n int64
	fmt.Sscan(string(v.Text), &n)
	return n
}

// imageOf finds the image a change was built from by its values.
func imageOf(c batch.Change) string {
	for _, im := range []image{low, high, mid, after2106, null} {
		same := true
		for i, v := range im.pg {
			got := c.Values[i+2]
			if (v == nil) != got.Null || (v != nil && *v != string(got.Text)) {
				same = false
				break
			}
		}
		if same {
			return im.name
		}
	}
	return ""
}

var images = map[string]image{"low": low, "high": high, "mid": mid, "after2106": after2106, "null": null}

// TestModernLayoutOnChdb runs the modern layout on a current ClickHouse engine (26.7, embedded
// by the npm package chdb): the sink itself, on a connection that hands its statements to chdb,
// creates the table (EnsureTable) and applies a workload's batches (Apply: snapshot chunks and
// their replays, inserts, updates, deletes, key changes, a re-insert of a deleted key, replays of
// committed batches, and a stale attempt whose older versions land after a newer commit). Then
// SELECT ... FINAL, with no filter on _is_deleted, must show exactly the source's rows, every
// column, key by key: tombstones and position markers hidden, no older version resurrected,
// Date32 and DateTime64 extremes exact to the microsecond. It checks again after OPTIMIZE FINAL
// has merged every part.
func TestModernLayoutOnChdb(t *testing.T) {
	t.Parallel()
	ch := testenv.NewChDB(t)
	conn := newChdbConn(ch.Session(t))
	ctx := t.Context()
	newSink := func() *Sink {
		// Addr only names the server in messages: the connection is conn.
		cfg := Config{Addr: "127.0.0.1:9000", Database: "sluice_modern", Schema: config.SchemaAuto}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		s := &Sink{cfg: cfg, conn: conn, log: sinktest.Logger(t), tables: map[string]bool{}}
		if err := s.detect(ctx); err != nil {
			t.Fatalf("detect: %v", err)
		}
		return s
	}
	sink := newSink()
	if !sink.Modern() {
		t.Fatalf("chdb reports ClickHouse %s: the sink chose the compatible layout", sink.Version())
	}
	t.Logf("chdb runs ClickHouse %s", sink.Version().Text)
	spec := typesSpec("types")
	if err := sink.EnsureTable(ctx, spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	if err := sink.EnsureTable(ctx, spec); err != nil { // the existing table reads back as created
		t.Fatalf("EnsureTable on the existing table: %v", err)
	}
	w := &modernWorkload{t: t, spec: spec, lsn: 0x5000, model: map[rowKey][]*string{}}
	apply := func(s *Sink, b sinks.Batch) {
		t.Helper()
		if err := s.Apply(ctx, b); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	step := func(phase batch.Phase, changes ...batch.Change) sinks.Batch {
		t.Helper()
		b := w.batch(phase, changes...)
		w.expect(changes, images)
		apply(sink, b)
		return b
	}
	k := func(id int64, region string) rowKey { return rowKey{id: id, region: region} }

	// Backfill: two chunks, the first written twice (a retried chunk has no guard).
	chunk := step(batch.PhaseSnapshot, w.upsert(batch.OpSnapshot, k(1, "eu"), low), w.upsert(batch.OpSnapshot, k(2, "eu"), high))
	apply(sink, chunk)
	step(batch.PhaseSnapshot, w.upsert(batch.OpSnapshot, k(3, "us"), mid), w.upsert(batch.OpSnapshot, k(4, "us"), null))
	step(batch.PhaseStream) // the end of the snapshot: its marker only

	b1 := step(batch.PhaseStream,
		w.upsert(batch.OpInsert, k(5, "eu"), after2106),
		w.upsert(batch.OpUpdate, k(1, "eu"), high),
		w.delete(k(2, "eu")),
		w.upsert(batch.OpInsert, k(6, "ap"), low))
	b2 := step(batch.PhaseStream,
		w.rekey(k(3, "us"), k(3, "eu"), after2106),
		w.upsert(batch.OpUpdate, k(4, "us"), mid),
		w.upsert(batch.OpInsert, k(2, "eu"), mid), // re-created after its delete
		w.upsert(batch.OpUpdate, k(5, "eu"), null),
		w.delete(k(6, "ap")),
		w.upsert(batch.OpInsert, k(6, "ap"), high), // deleted and re-inserted in one batch
		w.upsert(batch.OpUpdate, k(4, "us"), low))  // two updates of one key: the last wins
	// Replays of committed batches, as a retried activity sends them.
	apply(sink, b1)
	apply(sink, b2)

	// A stale attempt: batch N (insert K, update J) passes its guard, then a newer batch N+1
	// (delete K, update J) commits through another worker's sink before N's insert lands.
	staleN := w.batch(batch.PhaseStream, w.upsert(batch.OpInsert, k(7, "eu"), low), w.upsert(batch.OpUpdate, k(1, "eu"), low))
	nextChanges := []batch.Change{w.delete(k(7, "eu")), w.upsert(batch.OpUpdate, k(1, "eu"), mid)}
	next := w.batch(batch.PhaseStream, nextChanges...)
	w.expect(nextChanges, images)
	stale := newSink()
	stale.afterGuard = func(context.Context) { apply(newSink(), next) }
	apply(stale, staleN)

	last := step(batch.PhaseStream, w.upsert(batch.OpUpdate, k(5, "eu"), high), w.upsert(batch.OpInsert, k(8, "us"), after2106))

	check := func(when string) {
		t.Helper()
		got := finalRows(t, conn, spec)
		if d := diffImages(w.model, got); d != "" {
			t.Fatalf("%s: SELECT ... FINAL (no _is_deleted filter) on ClickHouse %s differs from the source:\n%s",
				when, sink.Version().Text, d)
		}
		pos, ok, err := sink.Position(ctx, spec)
		if err != nil || !ok || pos != last.Hi {
			t.Fatalf("%s: Position = %s, %v, %v; want %s", when, pos, ok, err, last.Hi)
		}
	}
	check("after the workload")
	if err := conn.Exec(ctx, "OPTIMIZE TABLE `sluice_modern`.`types` FINAL"); err != nil {
		t.Fatal(err)
	}
	check("after OPTIMIZE FINAL")
	if testing.Verbose() {
		t.Logf("statements the sink ran:\n%s", strings.Join(conn.statements, "\n"))
	}
}

// finalRows reads every column of typesSpec's table with SELECT ... FINAL and no filter, as
// toString prints it (blob as hex), keyed by (id, region). A key returned twice fails the test.
func finalRows(t *testing.T, conn *chdbConn, spec sinks.TableSpec) map[rowKey][]*string {
	t.Helper()
	var cols []string
	for _, c := range spec.Schema.Columns[2:] {
		if c.Name == "blob" {
			cols = append(cols, "hex(`blob`)")
			continue
		}
		cols = append(cols, "toString("+quote(c.Name)+")")
	}
	cols = append(cols, "toString(`committed_at`)", "`source_op`")
	q := "SELECT toString(id), region, " + strings.Join(cols, ", ") + " FROM `sluice_modern`.`types` FINAL"
	rows, err := conn.s.Rows(q)
	if err != nil {
		t.Fatal(err)
	}
	out := map[rowKey][]*string{}
	for _, r := range rows {
		var id int64
		fmt.Sscan(r[0].(string), &id)
		k := rowKey{id: id, region: r[1].(string)}
		if _, dup := out[k]; dup {
			t.Fatalf("%s: key %s returned twice", q, k)
		}
		vals := make([]*string, 0, len(r)-2)
		for _, v := range r[2:] {
			if v == nil {
				vals = append(vals, nil)
				continue
			}
			vals = append(vals, s(fmt.Sprint(v)))
		}
		out[k] = vals
	}
	return out
}

// diffImages lists the keys whose rows differ, column by column, in key order.
func diffImages(want, got map[rowKey][]*string) string {
	keys := map[rowKey]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	sorted := make([]rowKey, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].id != sorted[j].id {
			return sorted[i].id < sorted[j].id
		}
		return sorted[i].region < sorted[j].region
	})
	names := []string{}
	for _, c := range typesSpec("").Schema.Columns[2:] {
		names = append(names, c.Name)
	}
	names = append(names, "committed_at", "source_op")
	show := func(v *string) string {
		if v == nil {
			return "NULL"
		}
		return fmt.Sprintf("%q", *v)
	}
	var b strings.Builder
	for _, k := range sorted {
		w, inW := want[k]
		g, inG := got[k]
		switch {
		case inW && !inG:
			fmt.Fprintf(&b, "  key %s: missing\n", k)
		case !inW && inG:
			fmt.Fprintf(&b, "  key %s: visible but the source deleted it (or never had it): %s\n", k, joinShown(g, show))
		default:
			for i := range w {
				if show(w[i]) != show(g[i]) {
					fmt.Fprintf(&b, "  key %s column %s: got %s, want %s\n", k, names[i], show(g[i]), show(w[i]))
				}
			}
		}
	}
	return b.String()
}

func joinShown(vals []*string, show func(*string) string) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = show(v)
	}
	return strings.Join(parts, ", ")
}
