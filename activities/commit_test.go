package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/staging"
)

var testSource = batch.SourceID{SystemID: "7312345678901234567", Timeline: 1, Slot: "sluice_p1"}

func sp(lsn uint64, seq uint32) batch.SourcePosition {
	return batch.SourcePosition{Source: testSource, Position: batch.Position{LSN: lsn, Seq: seq}}
}

var testSpec = sinks.TableSpec{Target: "raw.orders", Schema: batch.Schema{
	Table: batch.TableName{Schema: "shop", Name: "orders"},
	Columns: []batch.Column{
		{Name: "id", TypeOID: 20, TypeName: "bigint", Key: true, NotNull: true},
		{Name: "note", TypeOID: 25, TypeName: "text"},
	},
}}

var testTable = TableConfig{Pipeline: "p1", Spec: testSpec, Sink: SinkRef{Name: "lake"}}

// testAuthority is a worker config holding testTable only.
var testAuthority = &Authority{Pipeline: "p1", Sink: SinkRef{Name: "lake"}, Tables: []TableConfig{testTable}}

// fakeSink is the activities tests' sinks.Sink: a committed position, the row positions
// applied and the number of EnsureTable calls. (The commit engine's own tests, in package
// commit, script every call of theirs.)
type fakeSink struct {
	mu       sync.Mutex
	pos      batch.SourcePosition
	hasPos   bool
	applied  [][]batch.Position // per Apply, the rows' positions
	applyErr error
	ensured  int
}

func (s *fakeSink) EnsureTable(context.Context, sinks.TableSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensured++
	return nil
}
func (s *fakeSink) Position(context.Context, sinks.TableSpec) (batch.SourcePosition, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos, s.hasPos, nil
}
func (s *fakeSink) Apply(_ context.Context, b sinks.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applyErr != nil {
		return s.applyErr
	}
	pos, err := batch.RowPositions(b.Record)
	if err != nil {
		return err
	}
	s.applied = append(s.applied, pos)
	s.pos, s.hasPos = b.Hi, true
	return nil
}
func (s *fakeSink) DiscardSnapshot(context.Context, sinks.TableSpec) error { return nil }
func (s *fakeSink) Close(context.Context) error                            { return nil }

type oneSink struct{ sink sinks.Sink }

func (p oneSink) Sink(context.Context, SinkRef) (sinks.Sink, error) { return p.sink, nil }

// stageRows stages a batch of one row per LSN in lsns (sequence 0), lo and hi as given.
func stageRows(t *testing.T, st *staging.Store, lo, hi batch.SourcePosition, lsns ...uint64) staging.BatchRef {
	t.Helper()
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, testSpec.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	var rows []batch.Change
	for _, l := range lsns {
		rows = append(rows, batch.Change{Op: batch.OpInsert, Pos: batch.Position{LSN: l}, CommitTS: time.Unix(1_800_000_000, 0).UTC(),
			Values: []batch.Value{{Text: []byte(fmt.Sprint(l))}, {Text: []byte("n")}}})
	}
	rec, err := rb.Build(rows, time.Unix(1_800_000_001, 0).UTC())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	buf := writeBatchFile(t, rec, lo, hi)
	ref, err := st.Put(context.Background(), staging.BatchRef{Pipeline: "p1", Table: testSpec.Schema.Table, Lo: lo, Hi: hi,
		Rows: int64(len(lsns)), Phase: batch.PhaseStream}, buf)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestCommitBatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		sinkPos     *batch.SourcePosition
		applyErr    error
		removeFile  bool
		wantApplied []uint64 // LSNs of the rows applied; nil: no Apply
		wantResult  CommitBatchResult
		wantErrType string // non-retryable ApplicationError type; "retryable" for a plain error
		wantInError []string
		wantStaged  bool // the file is still staged afterwards
	}{
		{name: "nothing committed: all rows applied", wantApplied: []uint64{100, 150, 200},
			wantResult: CommitBatchResult{Position: sp(200, 5), Rows: 3, Refs: 1}},
		{name: "covered batch skipped and acknowledged", sinkPos: ptr(sp(300, 0)),
			wantResult: CommitBatchResult{Position: sp(300, 0), Skipped: true, Dropped: 3, Refs: 1}},
		{name: "hi exactly committed is covered", sinkPos: ptr(sp(200, 5)),
			wantResult: CommitBatchResult{Position: sp(200, 5), Skipped: true, Dropped: 3, Refs: 1}},
		{name: "partly covered: rows at or below the position dropped", sinkPos: ptr(sp(150, 0)), wantApplied: []uint64{200},
			wantResult: CommitBatchResult{Position: sp(200, 5), Rows: 1, Dropped: 2, Refs: 1}},
		{name: "every row covered, hi not: nothing applied", sinkPos: ptr(sp(200, 0)),
			wantResult: CommitBatchResult{Position: sp(200, 0), Dropped: 3, Refs: 1}},
		{name: "another source is an error that says so", sinkPos: ptr(batch.SourcePosition{Source: batch.SourceID{SystemID: "42", Timeline: 2, Slot: "other"}, Position: batch.Position{LSN: 50}}),
			wantErrType: failure.SourceMismatch, wantInError: []string{"shop.orders", "raw.orders", "another source", "different sources", "sluice resume --table shop.orders"}, wantStaged: true},
		{name: "poison batch", applyErr: sinks.Poisonf("column %q of raw.orders is integer, cannot hold %q", "note", "n"),
			wantErrType: failure.PoisonBatch, wantInError: []string{"poison batch", "shop.orders", "0/64:0..0/C8:5", `column "note"`, "send resume"}, wantStaged: true},
		{name: "transient failure is retried", applyErr: errors.New("connection reset by peer"),
			wantErrType: "retryable", wantInError: []string{"connection reset"}, wantStaged: true},
		{name: "missing staged file of an uncommitted batch", removeFile: true,
			wantErrType: failure.StagedBatchMissing, wantInError: []string{"shop.orders", "no longer staged", "resync"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, err := staging.OpenDir(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ref := stageRows(t, st, sp(100, 0), sp(200, 5), 100, 150, 200)
			if tt.removeFile {
				if err := st.Acknowledge(ctx, ref); err != nil {
					t.Fatal(err)
				}
			}
			sink := &fakeSink{applyErr: tt.applyErr}
			if tt.sinkPos != nil {
				sink.pos, sink.hasPos = *tt.sinkPos, true
			}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(&Commit{Authority: testAuthority, Sinks: oneSink{sink}, Staging: st, HeartbeatEvery: time.Millisecond})

			val, err := env.ExecuteActivity("CommitBatch", CommitBatchInput{Table: testTable, Ref: ref})
			checkErr(t, err, tt.wantErrType, tt.wantInError)
			if err == nil {
				var got CommitBatchResult
				if err := val.Get(&got); err != nil {
					t.Fatal(err)
				}
				if got != tt.wantResult {
					t.Errorf("result %+v, want %+v", got, tt.wantResult)
				}
			}
			var applied []uint64
			for _, a := range sink.applied {
				for _, p := range a {
					applied = append(applied, p.LSN)
				}
			}
			if fmt.Sprint(applied) != fmt.Sprint(tt.wantApplied) {
				t.Errorf("applied rows at %v, want %v", applied, tt.wantApplied)
			}
			if _, err := st.ReadAll(ctx, ref); (err == nil) != tt.wantStaged {
				t.Errorf("staged afterwards: %v (read err %v), want %v", err == nil, err, tt.wantStaged)
			}
		})
	}
}

func checkErr(t *testing.T, err error, wantType string, wantIn []string) {
	t.Helper()
	if wantType == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want %s", wantType)
	}
	var appErr *temporal.ApplicationError
	isApp := errors.As(err, &appErr)
	switch {
	case wantType == "retryable" && isApp && appErr.NonRetryable():
		t.Errorf("error %v is non-retryable, want a transient one", err)
	case wantType != "retryable" && (!isApp || appErr.Type() != wantType || !appErr.NonRetryable()):
		t.Errorf("error %v, want a non-retryable %s", err, wantType)
	}
	for _, w := range wantIn {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// writeBatchFile writes rec in the staged batch file format (batch.ReadFile's) with the Arrow IPC
// writer directly, so the test does not depend on batch.WriteFile's options.
func writeBatchFile(t *testing.T, rec arrow.RecordBatch, lo, hi batch.SourcePosition) *bytes.Buffer {
	t.Helper()
	md := arrow.NewMetadata(
		[]string{batch.FileKeyFormat, batch.FileKeyTableSchema, batch.FileKeyTableName, batch.FileKeyLo, batch.FileKeyHi, batch.FileKeyPhase},
		[]string{batch.FileFormatVersion, testSpec.Schema.Table.Schema, testSpec.Schema.Table.Name, lo.String(), hi.String(), string(batch.PhaseStream)},
	)
	var buf bytes.Buffer
	fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(arrow.NewSchema(rec.Schema().Fields(), &md)))
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}
