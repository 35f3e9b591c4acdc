package activities

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/staging"
)

// groupSink is an in-test sinks.Sink recording every Apply as rows "op id note @lsn", its lo and
// hi, and the columns EnsureTable was asked for. A record with a key twice is an error: a sink
// may rely on each key appearing once.
type groupSink struct {
	mu       sync.Mutex
	pos      batch.SourcePosition
	hasPos   bool
	applies  []groupApply
	ensured  [][]batch.Column
	applyErr error
}

type groupApply struct {
	rows   []string
	lo, hi uint64
}

func (s *groupSink) EnsureTable(_ context.Context, spec sinks.TableSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensured = append(s.ensured, spec.Schema.Columns)
	return nil
}

func (s *groupSink) Position(context.Context, sinks.TableSpec) (batch.SourcePosition, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos, s.hasPos, nil
}

func (s *groupSink) Apply(_ context.Context, b sinks.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applyErr != nil {
		return s.applyErr
	}
	pos, err := batch.RowPositions(b.Record)
	if err != nil {
		return err
	}
	n := len(b.Spec.Schema.Columns)
	op, _ := batch.ContextIndex(n, batch.ColOp)
	a := groupApply{lo: b.Lo.Position.LSN, hi: b.Hi.Position.LSN}
	seen := map[string]bool{}
	for i := range int(b.Record.NumRows()) {
		id := b.Record.Column(0).ValueStr(i)
		if seen[id] {
			return fmt.Errorf("key %s appears twice in one batch", id)
		}
		seen[id] = true
		note := "∅"
		if !b.Record.Column(1).IsNull(i) {
			note = b.Record.Column(1).ValueStr(i)
		}
		a.rows = append(a.rows, fmt.Sprintf("%s %s %s @%d", b.Record.Column(op).ValueStr(i), id, note, pos[i].LSN))
	}
	s.applies = append(s.applies, a)
	s.pos, s.hasPos = b.Hi, true
	return nil
}

func (s *groupSink) DiscardSnapshot(context.Context, sinks.TableSpec) error { return nil }
func (s *groupSink) Close(context.Context) error                            { return nil }

// change is a change of the test table: key id, note (NULL when ""), at LSN lsn.
func change(op batch.Op, lsn uint64, id int, note string) batch.Change {
	v := []batch.Value{{Text: fmt.Append(nil, id)}, {Text: []byte(note)}}
	if note == "" {
		v[1] = batch.Value{Null: true}
	}
	return batch.Change{Op: op, Pos: batch.Position{LSN: lsn}, CommitTS: time.Unix(1_800_000_000, 0).UTC(), Values: v}
}

// stageGroupBatch stages rows as a stream batch [lo, hi] whose file says it was read with cols
// (the test table's columns when nil, and then the header does not name them).
func stageGroupBatch(t *testing.T, st *staging.Store, lo, hi uint64, cols []batch.Column, rows ...batch.Change) staging.BatchRef {
	t.Helper()
	schema := testSpec.Schema
	if cols != nil {
		schema.Columns = cols
		for i := range rows {
			for len(rows[i].Values) < len(cols) {
				rows[i].Values = append(rows[i].Values, batch.Value{Text: []byte("x")})
			}
		}
	}
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	rec, err := rb.Build(rows, time.Unix(1_800_000_001, 0).UTC())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var buf bytes.Buffer
	h := batch.FileHeader{Table: schema.Table, Lo: sp(lo, 0), Hi: sp(hi, 0), Phase: batch.PhaseStream, Columns: cols}
	if err := batch.WriteFile(&buf, rec, h, batch.CompressionNone); err != nil {
		t.Fatal(err)
	}
	ref, err := st.Put(context.Background(), staging.BatchRef{Pipeline: "p1", Table: schema.Table, Lo: h.Lo, Hi: h.Hi,
		Rows: int64(len(rows)), Phase: batch.PhaseStream}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// withExtra is the test table's columns and an added one (ADD COLUMN upstream).
var withExtra = append(slices.Clone(testSpec.Schema.Columns), batch.Column{Name: "extra", TypeOID: 25, TypeName: "text"})

func TestCommitBatchGroup(t *testing.T) {
	t.Parallel()
	// Three consecutive batches of inserts: ids 1-3 at 100..120, 4-6 at 130..150, 7-9 at 160..180.
	plain := func(t *testing.T, st *staging.Store) []staging.BatchRef {
		var refs []staging.BatchRef
		for b := range 3 {
			lo := uint64(100 + 30*b)
			refs = append(refs, stageGroupBatch(t, st, lo, lo+20, nil,
				change(batch.OpInsert, lo, 3*b+1, "n"), change(batch.OpInsert, lo+10, 3*b+2, "n"), change(batch.OpInsert, lo+20, 3*b+3, "n")))
		}
		return refs
	}
	inserts := func(lsns ...uint64) []string {
		var out []string
		for _, l := range lsns {
			out = append(out, fmt.Sprintf("insert %d n @%d", (l-100)/30*3+(l-100)%30/10+1, l))
		}
		return out
	}
	tests := []struct {
		name        string
		stage       func(*testing.T, *staging.Store) []staging.BatchRef
		sinkPos     *batch.SourcePosition
		applyErr    error
		removeFile  int // 1-based batch whose file is gone before the commit; 0 none
		wantApplies []groupApply
		wantResult  CommitBatchResult
		wantErrType string
		wantInError []string
		wantStaged  []bool // per batch: still staged afterwards
		wantEnsured int    // EnsureTable calls (target evolved)
	}{
		{name: "every batch new: one apply of all rows", stage: plain,
			wantApplies: []groupApply{{rows: inserts(100, 110, 120, 130, 140, 150, 160, 170, 180), lo: 100, hi: 180}},
			wantResult:  CommitBatchResult{Position: sp(180, 0), Rows: 9, Refs: 3},
			wantStaged:  []bool{false, false, false}},
		{name: "first batches covered: skipped, the rest applied from its lo", stage: plain, sinkPos: ptr(sp(150, 0)),
			wantApplies: []groupApply{{rows: inserts(160, 170, 180), lo: 160, hi: 180}},
			wantResult:  CommitBatchResult{Position: sp(180, 0), Rows: 3, Dropped: 6, Refs: 3},
			wantStaged:  []bool{false, false, false}},
		{name: "partly covered batch in the middle: its covered rows dropped", stage: plain, sinkPos: ptr(sp(140, 0)),
			wantApplies: []groupApply{{rows: inserts(150, 160, 170, 180), lo: 130, hi: 180}},
			wantResult:  CommitBatchResult{Position: sp(180, 0), Rows: 4, Dropped: 5, Refs: 3},
			wantStaged:  []bool{false, false, false}},
		{name: "every batch covered: nothing applied, every file acknowledged", stage: plain, sinkPos: ptr(sp(180, 0)),
			wantResult: CommitBatchResult{Position: sp(180, 0), Dropped: 9, Skipped: true, Refs: 3},
			wantStaged: []bool{false, false, false}},
		{name: "a key updated in the first batch and deleted in the third: the delete is applied", stage: func(t *testing.T, st *staging.Store) []staging.BatchRef {
			return []staging.BatchRef{
				stageGroupBatch(t, st, 100, 110, nil, change(batch.OpUpdate, 100, 1, "a"), change(batch.OpInsert, 110, 2, "b")),
				stageGroupBatch(t, st, 130, 140, nil, change(batch.OpUpdate, 130, 2, "c"), change(batch.OpInsert, 140, 3, "d")),
				stageGroupBatch(t, st, 160, 170, nil, change(batch.OpDelete, 160, 1, ""), change(batch.OpInsert, 170, 4, "e")),
			}
		},
			wantApplies: []groupApply{{rows: []string{"update 2 c @130", "insert 3 d @140", "delete 1 ∅ @160", "insert 4 e @170"}, lo: 100, hi: 170}},
			wantResult:  CommitBatchResult{Position: sp(170, 0), Rows: 4, Collapsed: 2, Refs: 3},
			wantStaged:  []bool{false, false, false}},
		{name: "a column change stops the group before it", stage: func(t *testing.T, st *staging.Store) []staging.BatchRef {
			return []staging.BatchRef{
				stageGroupBatch(t, st, 100, 100, nil, change(batch.OpInsert, 100, 1, "a")),
				stageGroupBatch(t, st, 130, 130, testSpec.Schema.Columns, change(batch.OpInsert, 130, 2, "b")),
				stageGroupBatch(t, st, 160, 160, withExtra, change(batch.OpInsert, 160, 3, "c")),
			}
		},
			wantApplies: []groupApply{{rows: []string{"insert 1 a @100", "insert 2 b @130"}, lo: 100, hi: 130}},
			wantResult:  CommitBatchResult{Position: sp(130, 0), Rows: 2, Refs: 2},
			wantStaged:  []bool{false, false, true}},
		{name: "a group starting at a column change evolves the target once", stage: func(t *testing.T, st *staging.Store) []staging.BatchRef {
			return []staging.BatchRef{
				stageGroupBatch(t, st, 100, 100, withExtra, change(batch.OpInsert, 100, 1, "a")),
				stageGroupBatch(t, st, 130, 130, withExtra, change(batch.OpInsert, 130, 2, "b")),
			}
		},
			wantApplies: []groupApply{{rows: []string{"insert 1 a @100", "insert 2 b @130"}, lo: 100, hi: 130}},
			wantResult:  CommitBatchResult{Position: sp(130, 0), Rows: 2, Refs: 2, Schema: &batch.Schema{Table: testSpec.Schema.Table, Columns: withExtra}},
			wantStaged:  []bool{false, false}, wantEnsured: 1},
		{name: "poison names the table, the group's range and every file", stage: plain,
			applyErr:    sinks.Poisonf("column %q of raw.orders is integer, cannot hold %q", "note", "n"),
			wantErrType: failure.PoisonBatch, wantInError: []string{"poison batch", "shop.orders", "3 batches 0/64:0..0/B4:0", "9 rows", "/000000000000006400000000-", "/000000000000008200000000-", "/00000000000000a000000000-", `column "note"`, "send resume"},
			wantStaged: []bool{true, true, true}},
		{name: "a file missing in the middle names that batch", stage: plain, removeFile: 2,
			wantErrType: failure.StagedBatchMissing, wantInError: []string{"shop.orders", "batch 0/82:0..0/96:0", "no longer staged", "resync"},
			wantStaged: []bool{true, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, err := staging.OpenDir(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			refs := tt.stage(t, st)
			if tt.removeFile > 0 {
				if err := st.Acknowledge(ctx, refs[tt.removeFile-1]); err != nil {
					t.Fatal(err)
				}
			}
			sink := &groupSink{applyErr: tt.applyErr}
			if tt.sinkPos != nil {
				sink.pos, sink.hasPos = *tt.sinkPos, true
			}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(&Commit{Authority: testAuthority, Sinks: oneSink{sink}, Staging: st, HeartbeatEvery: time.Millisecond})

			val, err := env.ExecuteActivity("CommitBatch", CommitBatchInput{Table: testTable, Refs: refs})
			checkErr(t, err, tt.wantErrType, tt.wantInError)
			if err == nil {
				var got CommitBatchResult
				if err := val.Get(&got); err != nil {
					t.Fatal(err)
				}
				gotSchema, wantSchema := got.Schema, tt.wantResult.Schema
				got.Schema, tt.wantResult.Schema = nil, nil
				if got != tt.wantResult || fmt.Sprint(gotSchema) != fmt.Sprint(wantSchema) {
					t.Errorf("result %+v (schema %v), want %+v (schema %v)", got, gotSchema, tt.wantResult, wantSchema)
				}
			}
			if fmt.Sprint(sink.applies) != fmt.Sprint(tt.wantApplies) {
				t.Errorf("applied\n%v\nwant\n%v", sink.applies, tt.wantApplies)
			}
			if len(sink.ensured) != tt.wantEnsured {
				t.Errorf("target evolved %d times, want %d", len(sink.ensured), tt.wantEnsured)
			}
			for i, ref := range refs {
				if _, err := st.ReadAll(ctx, ref); (err == nil) != tt.wantStaged[i] {
					t.Errorf("batch %d (%s) staged afterwards: %v, want %v", i+1, ref.Range(), err == nil, tt.wantStaged[i])
				}
			}
		})
	}
}

// laterSink is a groupSink whose position jumps to after once Position was read `reads` times:
// a concurrent attempt committed meanwhile.
type laterSink struct {
	*groupSink
	reads int
	after batch.SourcePosition
}

func (s *laterSink) Position(ctx context.Context, spec sinks.TableSpec) (batch.SourcePosition, bool, error) {
	s.mu.Lock()
	s.reads--
	if s.reads < 0 {
		s.pos, s.hasPos = s.after, true
	}
	s.mu.Unlock()
	return s.groupSink.Position(ctx, spec)
}

func TestCommitBatchGroupCommittedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := staging.OpenDir(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	refs := []staging.BatchRef{
		stageGroupBatch(t, st, 100, 110, nil, change(batch.OpInsert, 100, 1, "a"), change(batch.OpInsert, 110, 2, "b")),
		stageGroupBatch(t, st, 130, 140, nil, change(batch.OpInsert, 130, 3, "c"), change(batch.OpInsert, 140, 4, "d")),
	}
	// The concurrent attempt committed both and acknowledged the first file when this one reads
	// it.
	if err := st.Acknowledge(ctx, refs[0]); err != nil {
		t.Fatal(err)
	}
	sink := &laterSink{groupSink: &groupSink{}, reads: 1, after: refs[1].Hi}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&Commit{Authority: testAuthority, Sinks: oneSink{sink}, Staging: st, HeartbeatEvery: time.Millisecond})
	val, err := env.ExecuteActivity("CommitBatch", CommitBatchInput{Table: testTable, Ref: refs[0], Refs: refs})
	if err != nil {
		t.Fatal(err)
	}
	var got CommitBatchResult
	if err := val.Get(&got); err != nil {
		t.Fatal(err)
	}
	if want := (CommitBatchResult{Position: refs[1].Hi, Dropped: 4, Skipped: true, Refs: 2}); got != want {
		t.Errorf("result %+v, want %+v", got, want)
	}
	if len(sink.applies) != 0 {
		t.Errorf("applied %v again", sink.applies)
	}
	if _, err := st.ReadAll(ctx, refs[1]); err == nil {
		t.Error("the second file is still staged")
	}
}
