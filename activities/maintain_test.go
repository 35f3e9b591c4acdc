package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/iceberg"
	"github.com/sluicecdc/sluice/staging"
)

// maintainingSink is a fakeSink that implements sinks.Maintainer with a scripted answer.
type maintainingSink struct {
	fakeSink
	report sinks.MaintenanceReport
	err    error
	calls  int
}

func (s *maintainingSink) Maintain(context.Context, sinks.TableSpec) (sinks.MaintenanceReport, error) {
	s.calls++
	return s.report, s.err
}

func TestMaintainTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		sink        sinks.Sink
		want        MaintainResult // Duration and Message not compared
		wantErrType string         // non-retryable ApplicationError type; "retryable" for a plain error
		wantInError []string
	}{
		{name: "sink without maintenance says so", sink: &fakeSink{}, want: MaintainResult{}},
		{name: "maintainer's report is the result", sink: &maintainingSink{report: sinks.MaintenanceReport{"removed_data_files": 7}},
			want: MaintainResult{Supported: true, Report: sinks.MaintenanceReport{"removed_data_files": 7}}},
		{name: "poison failure is non-retryable MaintenanceFailed", sink: &maintainingSink{err: sinks.Poisonf("manifest %s is corrupt", "m1.avro")},
			wantErrType: failure.MaintenanceFailed, wantInError: []string{"shop.orders", "raw.orders", "m1.avro is corrupt", "commits go on"}},
		{name: "transient failure is retried", sink: &maintainingSink{err: errors.New("catalog connection refused")},
			wantErrType: "retryable", wantInError: []string{"raw.orders", "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(&Commit{Authority: testAuthority, Sinks: oneSink{tt.sink}, HeartbeatEvery: time.Millisecond})
			val, err := env.ExecuteActivity("MaintainTable", testTable)
			checkErr(t, err, tt.wantErrType, tt.wantInError)
			if err != nil {
				return
			}
			var got MaintainResult
			if err := val.Get(&got); err != nil {
				t.Fatal(err)
			}
			if got.Supported != tt.want.Supported || fmt.Sprint(got.Report) != fmt.Sprint(tt.want.Report) || got.Message == "" {
				t.Errorf("result %+v, want %+v with a message", got, tt.want)
			}
		})
	}
}

// TestMaintainTableIceberg commits many small batches (inserts, updates, deletes) to a real
// Iceberg sink (sqlite catalog, local warehouse) through CommitBatch, then runs MaintainTable:
// the visible rows and the committed position are unchanged, there are fewer data files, and
// the table takes commits afterwards.
func TestMaintainTableIceberg(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	sink, err := iceberg.New(ctx, iceberg.Config{
		Catalog:   iceberg.CatalogConfig{Type: iceberg.CatalogSQL, Dialect: iceberg.DialectSQLite, URI: filepath.Join(dir, "catalog.db")},
		Warehouse: "file://" + filepath.Join(dir, "warehouse"),
	}, iceberg.Options{
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Maintenance: &iceberg.MaintenanceOptions{RetainSnapshots: 1, MinInputFiles: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	st, err := staging.OpenDir(ctx, filepath.Join(dir, "staging"))
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&Commit{Authority: testAuthority, Sinks: oneSink{sink}, Staging: st, HeartbeatEvery: 10 * time.Millisecond})
	if _, err := env.ExecuteActivity("EnsureTable", testTable); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}

	const commits = 40
	want := map[int64]string{}
	commit := func(lsn uint64, changes ...batch.Change) {
		t.Helper()
		for i := range changes {
			changes[i].Pos = batch.Position{LSN: lsn, Seq: uint32(i)}
			changes[i].CommitTS = time.Unix(1_800_000_000, 0).UTC()
			if changes[i].Op == batch.OpDelete {
				delete(want, keyOf(changes[i]))
			} else {
				want[keyOf(changes[i])] = string(changes[i].Values[1].Text)
			}
		}
		ref := stageChanges(t, st, sp(lsn, 0), sp(lsn, uint32(len(changes)-1)), changes)
		if _, err := env.ExecuteActivity("CommitBatch", CommitBatchInput{Table: testTable, Ref: ref}); err != nil {
			t.Fatalf("CommitBatch at %s: %v", ref.Hi, err)
		}
	}
	for i := range commits {
		lsn := uint64(100 * (i + 1))
		changes := []batch.Change{row(batch.OpInsert, int64(1000+i), fmt.Sprint("new ", i)), row(batch.OpUpdate, int64(1000+i/2), fmt.Sprint("upd ", i))}
		if i%5 == 4 {
			changes = append(changes, batch.Change{Op: batch.OpDelete, Values: []batch.Value{{Text: fmt.Append(nil, 1000+i-3)}, {Null: true}}})
		}
		commit(lsn, changes...)
	}
	posBefore, _, err := sink.Position(ctx, testSpec)
	if err != nil {
		t.Fatal(err)
	}
	dataBefore, delBefore, snapsBefore := icebergFiles(t, sink)

	val, err := env.ExecuteActivity("MaintainTable", testTable)
	if err != nil {
		t.Fatalf("MaintainTable: %v", err)
	}
	var res MaintainResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	dataAfter, delAfter, snapsAfter := icebergFiles(t, sink)
	t.Logf("MaintainTable after %d commits: %s; data files %d -> %d, delete files %d -> %d, snapshots %d -> %d; report %v",
		commits, res.Message, dataBefore, dataAfter, delBefore, delAfter, snapsBefore, snapsAfter, res.Report)

	if !res.Supported || res.Report["removed_data_files"] == 0 {
		t.Errorf("result %+v: want the Iceberg sink's report with removed data files", res)
	}
	if d := diffNotes(want, icebergRows(t, sink)); d != "" {
		t.Errorf("rows changed by maintenance:\n%s", d)
	}
	if pos, ok, err := sink.Position(ctx, testSpec); err != nil || !ok || pos != posBefore {
		t.Errorf("Position after maintenance = %s, %v, %v; want %s", pos, ok, err, posBefore)
	}
	if dataAfter >= dataBefore || delAfter > delBefore || snapsAfter >= snapsBefore {
		t.Errorf("data files %d -> %d, delete files %d -> %d, snapshots %d -> %d: want fewer data files and snapshots",
			dataBefore, dataAfter, delBefore, delAfter, snapsBefore, snapsAfter)
	}

	// The table goes on: a commit after maintenance lands, and maintenance again is harmless.
	commit(100*(commits+1), row(batch.OpUpdate, 1000, "after"))
	if _, err := env.ExecuteActivity("MaintainTable", testTable); err != nil {
		t.Fatalf("second MaintainTable: %v", err)
	}
	if d := diffNotes(want, icebergRows(t, sink)); d != "" {
		t.Errorf("rows after a commit and a second maintenance:\n%s", d)
	}
	if pos, _, _ := sink.Position(ctx, testSpec); pos != sp(100*(commits+1), 0) {
		t.Errorf("Position = %s, want %s", pos, sp(100*(commits+1), 0))
	}
}

func row(op batch.Op, id int64, note string) batch.Change {
	return batch.Change{Op: op, Values: []batch.Value{{Text: fmt.Append(nil, id)}, {Text: []byte(note)}}}
}

func keyOf(c batch.Change) int64 {
	var id int64
	_, _ = fmt.Sscan(string(c.Values[0].Text), &id)
	return id
}

// stageChanges stages changes of testSpec's table as one batch from lo to hi.
func stageChanges(t *testing.T, st *staging.Store, lo, hi batch.SourcePosition, changes []batch.Change) staging.BatchRef {
	t.Helper()
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, testSpec.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	rec, err := rb.Build(changes, time.Unix(1_800_000_001, 0).UTC())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	ref, err := st.Put(t.Context(), staging.BatchRef{Pipeline: "p1", Table: testSpec.Schema.Table, Lo: lo, Hi: hi,
		Rows: int64(len(changes)), Phase: batch.PhaseStream}, writeBatchFile(t, rec, lo, hi))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func icebergTable(t *testing.T, sink *iceberg.Sink) *table.Table {
	t.Helper()
	tbl, err := sink.Catalog().LoadTable(t.Context(), table.Identifier{"raw", "orders"})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// icebergRows scans the table with deletes applied: id -> note.
func icebergRows(t *testing.T, sink *iceberg.Sink) map[int64]string {
	t.Helper()
	_, itr, err := icebergTable(t, sink).Scan(table.WithSelectedFields("id", "note")).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for rec, err := range itr {
		if err != nil {
			t.Fatal(err)
		}
		ids, notes := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
		for i := range ids.Len() {
			if _, dup := got[ids.Value(i)]; dup {
				t.Errorf("key %d is visible twice", ids.Value(i))
			}
			got[ids.Value(i)] = notes.Value(i)
		}
		rec.Release()
	}
	return got
}

// icebergFiles counts the live data files and delete files of the current snapshot, and the
// snapshots the metadata keeps.
func icebergFiles(t *testing.T, sink *iceberg.Sink) (data, deletes, snapshots int) {
	t.Helper()
	tbl := icebergTable(t, sink)
	fs, err := tbl.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.DataFile().ContentType() == iceberggo.EntryContentData {
				data++
			} else {
				deletes++
			}
		}
	}
	return data, deletes, len(tbl.Metadata().Snapshots())
}

func diffNotes(want, got map[int64]string) string {
	var out string
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			out += fmt.Sprintf("key %d = %q (present %v), want %q\n", k, g, ok, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out += fmt.Sprintf("key %d = %q should not be visible\n", k, g)
		}
	}
	return out
}
