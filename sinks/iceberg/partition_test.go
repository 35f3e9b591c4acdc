package iceberg

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// event is the visible state of one key of the events table: its created_at (microseconds
// since the epoch, UTC) and name.
type event struct {
	At   int64
	Name string
}

// eventsSpec is public.events(id int8 key, created_at timestamptz, name text), plus extra text
// columns (schema evolution).
func eventsSpec(target string, extra ...string) sinks.TableSpec {
	cols := []batch.Column{
		{Name: "id", TypeOID: 20, TypeName: "bigint", TypeMod: -1, NotNull: true, Key: true, Category: "N"},
		{Name: "created_at", TypeOID: 1184, TypeName: "timestamp with time zone", TypeMod: -1, Category: "D"},
		{Name: "name", TypeOID: 25, TypeName: "text", TypeMod: -1, Category: "S"},
	}
	for _, e := range extra {
		cols = append(cols, batch.Column{Name: e, TypeOID: 25, TypeName: "text", TypeMod: -1, Category: "S"})
	}
	return sinks.TableSpec{Target: target, Schema: batch.Schema{Table: batch.TableName{Schema: "public", Name: "events"}, Columns: cols}}
}

// eventsTable streams changes into one events target and keeps the source's state to compare
// with: the model a test changes along with each batch.
type eventsTable struct {
	t     *testing.T
	sink  *Sink
	spec  sinks.TableSpec
	lsn   uint64
	model map[int64]event
	extra map[int64]string // the value of the first extra column, once there is one
}

// newEventsTable is a sink on a fresh sqlite catalog with the events target laid out as layout.
func newEventsTable(t *testing.T, layout *TableLayout) *eventsTable {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{
		Catalog:   CatalogConfig{Type: CatalogSQL, URI: filepath.Join(dir, "catalog.db")},
		Warehouse: filepath.Join(dir, "warehouse"),
	}
	opts := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if layout != nil {
		opts.Tables = map[string]TableLayout{"raw.events": *layout}
	}
	s, err := New(t.Context(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	e := &eventsTable{t: t, sink: s, spec: eventsSpec("raw.events"), lsn: 0x1000000, model: map[int64]event{}, extra: map[int64]string{}}
	if err := s.EnsureTable(t.Context(), e.spec); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	return e
}

// change is one row of a batch: an upsert of id with at and name, or a delete of id.
type change struct {
	id     int64
	at     int64
	name   string
	delete bool
}

// apply commits the changes (at most one per key) as one stream batch and applies them to the
// model.
func (e *eventsTable) apply(changes ...change) {
	e.t.Helper()
	e.lsn += 0x100
	b := e.batchOf(changes...)
	if err := e.sink.Apply(e.t.Context(), b); err != nil {
		e.t.Fatalf("Apply at %x: %v", e.lsn, err)
	}
}

// batchOf builds the stream batch of changes at e.lsn and applies them to the model.
func (e *eventsTable) batchOf(changes ...change) sinks.Batch {
	e.t.Helper()
	var chs []batch.Change
	for i, c := range changes {
		vals := []batch.Value{sinktest.Text(strconv.FormatInt(c.id, 10)), {Null: true}, {Null: true}}
		op := batch.OpDelete
		if !c.delete {
			op = batch.OpUpdate
			vals[1] = sinktest.Text(time.UnixMicro(c.at).UTC().Format("2006-01-02 15:04:05.999999-07"))
			vals[2] = sinktest.Text(c.name)
		}
		for range len(e.spec.Schema.Columns) - 3 {
			if c.delete {
				vals = append(vals, batch.Value{Null: true})
			} else {
				vals = append(vals, sinktest.Text("x"+c.name))
			}
		}
		chs = append(chs, batch.Change{Op: op, Pos: batch.Position{LSN: e.lsn, Seq: uint32(i)},
			CommitTS: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Values: vals})
		if c.delete {
			delete(e.model, c.id)
			delete(e.extra, c.id)
		} else {
			e.model[c.id] = event{c.at, c.name}
			if len(e.spec.Schema.Columns) > 3 {
				e.extra[c.id] = "x" + c.name
			}
		}
	}
	return sinktest.Batch(e.t, e.spec, batch.PhaseStream, batch.Position{LSN: e.lsn, Seq: uint32(max(len(chs)-1, 0))}, chs...)
}

func (e *eventsTable) table() *table.Table {
	e.t.Helper()
	tbl, err := e.sink.Catalog().LoadTable(e.t.Context(), table.Identifier{"raw", "events"})
	if err != nil {
		e.t.Fatal(err)
	}
	return tbl
}

// icebergGoRows scans the table with iceberg-go.
func (e *eventsTable) icebergGoRows() map[int64]event {
	e.t.Helper()
	_, itr, err := e.table().Scan(table.WithSelectedFields("id", "created_at", "name")).ToArrowRecords(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	got := map[int64]event{}
	for rec, err := range itr {
		if err != nil {
			e.t.Fatal(err)
		}
		ids := rec.Column(0).(*array.Int64)
		ats := rec.Column(1).(*array.Timestamp)
		names := rec.Column(2).(*array.String)
		for i := range ids.Len() {
			if _, dup := got[ids.Value(i)]; dup {
				e.t.Errorf("iceberg-go: key %d is visible twice", ids.Value(i))
			}
			got[ids.Value(i)] = event{int64(ats.Value(i)), names.Value(i)}
		}
		rec.Release()
	}
	return got
}

// chdbRows reads the table with chdb's icebergLocal (ClickHouse's Iceberg reader).
func (e *eventsTable) chdbRows(ch testenv.ChDB) map[int64]event {
	e.t.Helper()
	rows, err := ch.IcebergLocal(e.t.Context(), e.table().Location(), "id, toUnixTimestamp64Micro(created_at) AS at, name")
	if err != nil {
		e.t.Fatal(err)
	}
	got := map[int64]event{}
	for _, r := range rows {
		id, _ := r["id"].(interface{ Int64() (int64, error) }).Int64()
		at, _ := r["at"].(interface{ Int64() (int64, error) }).Int64()
		name, _ := r["name"].(string)
		if _, dup := got[id]; dup {
			e.t.Errorf("chdb: key %d is visible twice", id)
		}
		got[id] = event{at, name}
	}
	return got
}

// check compares both readers with the model, key by key.
func (e *eventsTable) check(ch testenv.ChDB, when string) {
	e.t.Helper()
	for reader, got := range map[string]map[int64]event{"iceberg-go": e.icebergGoRows(), "chdb " + testenv.ChDBVersion: e.chdbRows(ch)} {
		if d := sinktest.DiffRows(e.model, got); d != "" {
			e.t.Errorf("%s, read by %s: sink differs from source:\n%s", when, reader, d)
		}
	}
}

// day returns a timestamp on day d of November 2026 (UTC) at minute m, in microseconds.
func day(d, m int) int64 {
	return time.Date(2026, 11, d, 10, m, 0, 0, time.UTC).UnixMicro()
}

// streamEvents commits rounds of random inserts, updates that move rows to another day (and so
// another partition), deletes and key changes (the old key deleted, the row inserted under a new
// one, in one batch), at most one change per key and batch.
func (e *eventsTable) streamEvents(rng *rand.Rand, rounds int) {
	e.t.Helper()
	next := int64(1)
	for id := range e.model {
		next = max(next, id+1)
	}
	for r := range rounds {
		touched := map[int64]bool{}
		var chs []change
		pick := func() (int64, bool) {
			for range 5 {
				for id := range e.model {
					if !touched[id] && rng.IntN(3) == 0 {
						return id, true
					}
				}
			}
			return 0, false
		}
		for range 6 {
			chs = append(chs, change{id: next, at: day(1+rng.IntN(5), r), name: fmt.Sprint("i", r)})
			touched[next] = true
			next++
		}
		for range 4 { // updates: mostly to another day
			if id, ok := pick(); ok {
				touched[id] = true
				chs = append(chs, change{id: id, at: day(1+rng.IntN(5), r), name: fmt.Sprint("u", r)})
			}
		}
		for range 2 {
			if id, ok := pick(); ok {
				touched[id] = true
				chs = append(chs, change{id: id, delete: true})
			}
		}
		if id, ok := pick(); ok { // a primary-key change, into another day
			touched[id] = true
			old := e.model[id]
			chs = append(chs, change{id: id, delete: true}, change{id: next, at: old.At + 86_400_000_000, name: old.Name + "k"})
			touched[next] = true
			next++
		}
		e.apply(chs...)
	}
}

// TestPartitionedTableMovesRows streams inserts, updates that move rows between day partitions,
// deletes and key changes into a table partitioned by [day(created_at), bucket(16, id)]: the
// sink equals the source key by key, read by iceberg-go and by ClickHouse (chdb), before and
// after maintenance (compaction and snapshot expiry).
func TestPartitionedTableMovesRows(t *testing.T) {
	t.Parallel()
	ch := testenv.NewChDB(t)
	e := newEventsTable(t, &TableLayout{
		PartitionBy: []string{"day(created_at)", "bucket(16", "id)"}, // as YAML's flow list [day(created_at), bucket(16, id)] splits it
		SortBy:      []string{"created_at desc"},
		Properties:  []config.TableProperty{{Key: "write.metadata.previous-versions-max", Value: "7"}},
	})
	tbl := e.table()
	if spec := tbl.Spec(); spec.NumFields() != 2 {
		t.Fatalf("partition spec %s, want [created_at_day, id_bucket]", spec)
	}
	if tbl.Metadata().PartitionSpecByID(0) == nil || !tbl.Metadata().PartitionSpecByID(0).IsUnpartitioned() {
		t.Fatalf("spec 0 is %v; want it unpartitioned, for the global equality deletes", tbl.Metadata().PartitionSpecByID(0))
	}
	if tbl.SortOrder().Len() != 1 || tbl.Properties()["write.metadata.previous-versions-max"] != "7" {
		t.Errorf("sort order %s, properties %v; want created_at desc and the configured property", tbl.SortOrder(), tbl.Properties())
	}

	rng := rand.New(rand.NewPCG(18, 1))
	e.streamEvents(rng, 12)
	// One row moved back and forth across days in consecutive batches, then deleted.
	e.apply(change{id: 1, at: day(1, 0), name: "a"})
	e.apply(change{id: 1, at: day(5, 0), name: "b"})
	e.apply(change{id: 1, at: day(2, 0), name: "c"})
	e.check(ch, "after streaming")
	// A restart (EnsureTable again) finds the table as configured and changes nothing.
	if err := e.sink.EnsureTable(t.Context(), e.spec); err != nil {
		t.Fatalf("EnsureTable on the partitioned table with data: %v", err)
	}
	e.apply(change{id: 1, delete: true})
	e.check(ch, "after deleting a moved row")

	if _, err := e.sink.MaintainWith(t.Context(), e.spec.Target, MaintenanceOptions{RetainSnapshots: 1, MinInputFiles: 2}); err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	e.check(ch, "after maintenance")
	e.streamEvents(rng, 3)
	e.check(ch, "after more changes on the compacted table")
}

// TestPartitionLayoutErrors: a partition column the table lacks, or a transform its type cannot
// take, is poison at setup naming the table and the column; a different partitioning asked of a
// table with data is refused, not applied.
func TestPartitionLayoutErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		layout TableLayout
		want   string
	}{
		{"missing column", TableLayout{PartitionBy: []string{"day(updated_at)"}}, "table public.events: tables[].iceberg.partition_by day(updated_at): column updated_at is not a column of the table"},
		{"transform for another type", TableLayout{PartitionBy: []string{"day(name)"}}, "table public.events: tables[].iceberg.partition_by day(name): column name is string, which day cannot take"},
		{"sort column", TableLayout{SortBy: []string{"hour(id)"}}, "tables[].iceberg.sort_by hour(id): column id is long, which hour cannot take"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s, err := New(t.Context(), Config{Catalog: CatalogConfig{Type: CatalogSQL, URI: filepath.Join(dir, "c.db")}, Warehouse: dir},
				Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Tables: map[string]TableLayout{"raw.events": tc.layout}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			err = s.EnsureTable(t.Context(), eventsSpec("raw.events"))
			if !sinks.IsPoison(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("EnsureTable = %v; want poison containing %q", err, tc.want)
			}
			// sluice check finds the same problem without a catalog.
			if err := CheckLayout(eventsSpec("raw.events"), tc.layout, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckLayout = %v; want an error containing %q", err, tc.want)
			}
		})
	}

	if err := CheckLayout(eventsSpec("raw.events"), TableLayout{PartitionBy: []string{"day(created_at)", "bucket(16, id)"}, SortBy: []string{"name"}}, 0); err != nil {
		t.Errorf("CheckLayout of a valid layout: %v", err)
	}
	e := newEventsTable(t, &TableLayout{PartitionBy: []string{"day(created_at)"}})
	e.apply(change{id: 1, at: day(1, 0), name: "a"})
	e.sink.tables["raw.events"] = TableLayout{PartitionBy: []string{"month(created_at)"}}
	err := e.sink.EnsureTable(t.Context(), e.spec)
	if !sinks.IsPoison(err) || !strings.Contains(err.Error(), "is partitioned by") {
		t.Errorf("EnsureTable with another partitioning = %v; want poison saying the table keeps its partitioning", err)
	}
}

// TestPartitionedCompositeKeyMovesRows: a composite key of text and uuid columns on a table
// partitioned by day(created_at) finds the old image of a moved or deleted row (the key is
// compared between the batch and the table scan column by column).
func TestPartitionedCompositeKeyMovesRows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := New(t.Context(), Config{Catalog: CatalogConfig{Type: CatalogSQL, URI: filepath.Join(dir, "c.db")}, Warehouse: dir},
		Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Tables: map[string]TableLayout{"raw.regions": {PartitionBy: []string{"day(created_at)"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	spec := sinks.TableSpec{Target: "raw.regions", Schema: batch.Schema{Table: batch.TableName{Schema: "public", Name: "regions"}, Columns: []batch.Column{
		{Name: "region", TypeOID: 25, TypeName: "text", TypeMod: -1, NotNull: true, Key: true, Category: "S"},
		{Name: "uid", TypeOID: 2950, TypeName: "uuid", TypeMod: -1, NotNull: true, Key: true, Category: "U"},
		{Name: "created_at", TypeOID: 1184, TypeName: "timestamp with time zone", TypeMod: -1, Category: "D"},
	}}}
	if err := s.EnsureTable(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	u1, u2 := "6f1c3a52-5d3e-4c1e-9a55-1f0f7a3f0001", "6f1c3a52-5d3e-4c1e-9a55-1f0f7a3f0002"
	row := func(op batch.Op, region, uid, at string, seq uint32, lsn uint64) batch.Change {
		v := []batch.Value{sinktest.Text(region), sinktest.Text(uid), {Null: true}}
		if at != "" {
			v[2] = sinktest.Text(at)
		}
		return batch.Change{Op: op, Pos: batch.Position{LSN: lsn, Seq: seq}, CommitTS: time.Unix(1_800_000_000, 0).UTC(), Values: v}
	}
	for i, chs := range [][]batch.Change{
		{row(batch.OpInsert, "eu", u1, "2026-11-01 10:00:00+00", 0, 0x100), row(batch.OpInsert, "eu", u2, "2026-11-01 11:00:00+00", 1, 0x100)},
		{row(batch.OpUpdate, "eu", u1, "2026-11-04 10:00:00+00", 0, 0x200), row(batch.OpDelete, "eu", u2, "", 1, 0x200)},
	} {
		lsn := uint64(0x100 * (i + 1))
		if err := s.Apply(t.Context(), sinktest.Batch(t, spec, batch.PhaseStream, batch.Position{LSN: lsn, Seq: 1}, chs...)); err != nil {
			t.Fatal(err)
		}
	}
	tbl, err := s.Catalog().LoadTable(t.Context(), table.Identifier{"raw", "regions"})
	if err != nil {
		t.Fatal(err)
	}
	_, itr, err := tbl.Scan(table.WithSelectedFields("region", "uid", "created_at")).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rec, err := range itr {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			got = append(got, rec.Column(0).ValueStr(i)+" "+rec.Column(1).ValueStr(i)+" "+rec.Column(2).ValueStr(i))
		}
		rec.Release()
	}
	if len(got) != 1 || !strings.Contains(got[0], u1) || !strings.Contains(got[0], "2026-11-04") {
		t.Errorf("rows %q; want only eu %s on 2026-11-04", got, u1)
	}
}
