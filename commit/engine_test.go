package commit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/staging"
)

// withExtra is the test table's columns and an added one (ADD COLUMN upstream).
var withExtra = append(slices.Clone(testSpec.Schema.Columns), batch.Column{Name: "extra", TypeOID: 25, TypeName: "text"})

// otherSource is a position of another source than the test batches'.
var otherSource = batch.SourcePosition{Source: batch.SourceID{SystemID: "42", Timeline: 2, Slot: "other"}, Position: batch.Position{LSN: 50}}

// transient stands for "a transient error": unmarked, for the activity to retry.
const transient = "transient"

// TestCommit covers every outcome of Engine.Commit: skip, trim, apply, collapse, group split,
// evolve, guard refusal, poison, transient errors, a batch committed meanwhile and a staged file
// that is gone.
func TestCommit(t *testing.T) {
	t.Parallel()
	// Three consecutive batches of inserts: ids 1-3 at 100..120, 4-6 at 130..150, 7-9 at 160..180.
	plain := func(t *testing.T, st *staging.Store) []staging.BatchRef {
		var refs []staging.BatchRef
		for b := range 3 {
			lo := uint64(100 + 30*b)
			refs = append(refs, stageBatch(t, st, lo, lo+20, nil,
				change(batch.OpInsert, lo, 3*b+1, "n"), change(batch.OpInsert, lo+10, 3*b+2, "n"), change(batch.OpInsert, lo+20, 3*b+3, "n")))
		}
		return refs
	}
	// One batch of three inserts at 100, 150, 200.
	one := func(t *testing.T, st *staging.Store) []staging.BatchRef {
		return []staging.BatchRef{stageBatch(t, st, 100, 200, nil,
			change(batch.OpInsert, 100, 1, "n"), change(batch.OpInsert, 150, 2, "n"), change(batch.OpInsert, 200, 3, "n"))}
	}
	evolving := func(t *testing.T, st *staging.Store) []staging.BatchRef {
		return []staging.BatchRef{
			stageBatch(t, st, 100, 100, withExtra, change(batch.OpInsert, 100, 1, "a")),
			stageBatch(t, st, 130, 130, withExtra, change(batch.OpInsert, 130, 2, "b")),
		}
	}
	inserts := func(lsns ...uint64) []string {
		var out []string
		for _, l := range lsns {
			out = append(out, fmt.Sprintf("insert %d n @%d", (l-100)/30*3+(l-100)%30/10+1, l))
		}
		return out
	}
	tests := []struct {
		name       string
		stage      func(*testing.T, *staging.Store) []staging.BatchRef
		table      *Table // testTable when nil
		sinkPos    *batch.SourcePosition
		onPosition func(n int, s *fakeSink) error
		onApply    func(int) error
		onEnsure   func(int) error
		removeFile int // 1-based batch whose file is gone before the commit; 0 none

		wantApplies []fakeApply
		wantResult  Result
		wantErrType string // the failure type; transient for an unmarked error; "" for none
		wantInError []string
		wantStaged  []bool // per batch: still staged afterwards
		wantEnsured int    // EnsureTable calls that succeeded (target evolved)
	}{
		{name: "apply: nothing committed, all rows in one apply", stage: one,
			wantApplies: []fakeApply{{rows: []string{"insert 1 n @100", "insert 2 n @150", "insert 3 n @200"}, lo: 100, hi: 200}},
			wantResult:  Result{Position: sp(200, 0), Rows: 3, Refs: 1}, wantStaged: []bool{false}},
		{name: "apply: every batch new, one apply of the group", stage: plain,
			wantApplies: []fakeApply{{rows: inserts(100, 110, 120, 130, 140, 150, 160, 170, 180), lo: 100, hi: 180}},
			wantResult:  Result{Position: sp(180, 0), Rows: 9, Refs: 3}, wantStaged: []bool{false, false, false}},
		{name: "skip: batch covered whole, acknowledged, nothing applied", stage: one, sinkPos: ptr(sp(300, 0)),
			wantResult: Result{Position: sp(300, 0), Skipped: true, Dropped: 3, Refs: 1}, wantStaged: []bool{false}},
		{name: "skip: hi exactly committed is covered", stage: one, sinkPos: ptr(sp(200, 0)),
			wantResult: Result{Position: sp(200, 0), Skipped: true, Dropped: 3, Refs: 1}, wantStaged: []bool{false}},
		{name: "skip: every batch of the group covered", stage: plain, sinkPos: ptr(sp(180, 0)),
			wantResult: Result{Position: sp(180, 0), Dropped: 9, Skipped: true, Refs: 3}, wantStaged: []bool{false, false, false}},
		{name: "trim: partly covered, rows at or below the position dropped", stage: one, sinkPos: ptr(sp(150, 0)),
			wantApplies: []fakeApply{{rows: []string{"insert 3 n @200"}, lo: 100, hi: 200}},
			wantResult:  Result{Position: sp(200, 0), Rows: 1, Dropped: 2, Refs: 1}, wantStaged: []bool{false}},
		{name: "trim: every row covered, hi not: nothing applied, not skipped", stage: func(t *testing.T, st *staging.Store) []staging.BatchRef {
			return []staging.BatchRef{stageBatch(t, st, 100, 210, nil,
				change(batch.OpInsert, 100, 1, "n"), change(batch.OpInsert, 150, 2, "n"), change(batch.OpInsert, 200, 3, "n"))}
		},
			sinkPos:    ptr(sp(200, 0)),
			wantResult: Result{Position: sp(200, 0), Dropped: 3, Refs: 1}, wantStaged: []bool{false}},
		{name: "skip and trim: first batches covered, a partly covered one applied from its lo", stage: plain, sinkPos: ptr(sp(140, 0)),
			wantApplies: []fakeApply{{rows: inserts(150, 160, 170, 180), lo: 130, hi: 180}},
			wantResult:  Result{Position: sp(180, 0), Rows: 4, Dropped: 5, Refs: 3}, wantStaged: []bool{false, false, false}},
		{name: "collapse: a key updated in the first batch and deleted in the third, the delete applied", stage: func(t *testing.T, st *staging.Store) []staging.BatchRef {
			return []staging.BatchRef{
				stageBatch(t, st, 100, 110, nil, change(batch.OpUpdate, 100, 1, "a"), change(batch.OpInsert, 110, 2, "b")),
				stageBatch(t, st, 130, 140, nil, change(batch.OpUpdate, 130, 2, "c"), change(batch.OpInsert, 140, 3, "d")),
				stageBatch(t, st, 160, 170, nil, change(batch.OpDelete, 160, 1, ""), change(batch.OpInsert, 170, 4, "e")),
			}
		},
			wantApplies: []fakeApply{{rows: []string{"update 2 c @130", "insert 3 d @140", "delete 1 ∅ @160", "insert 4 e @170"}, lo: 100, hi: 170}},
			wantResult:  Result{Position: sp(170, 0), Rows: 4, Collapsed: 2, Refs: 3}, wantStaged: []bool{false, false, false}},
		{name: "group split: a column change stops the group before it", stage: func(t *testing.T, st *staging.Store) []staging.BatchRef {
			return []staging.BatchRef{
				stageBatch(t, st, 100, 100, nil, change(batch.OpInsert, 100, 1, "a")),
				stageBatch(t, st, 130, 130, testSpec.Schema.Columns, change(batch.OpInsert, 130, 2, "b")),
				stageBatch(t, st, 160, 160, withExtra, change(batch.OpInsert, 160, 3, "c")),
			}
		},
			wantApplies: []fakeApply{{rows: []string{"insert 1 a @100", "insert 2 b @130"}, lo: 100, hi: 130}},
			wantResult:  Result{Position: sp(130, 0), Rows: 2, Refs: 2}, wantStaged: []bool{false, false, true}},
		{name: "evolve: batches read with other columns, EnsureTable then apply, Schema in result", stage: evolving,
			wantApplies: []fakeApply{{rows: []string{"insert 1 a @100", "insert 2 b @130"}, lo: 100, hi: 130}},
			wantResult:  Result{Position: sp(130, 0), Rows: 2, Refs: 2, Schema: &batch.Schema{Table: testSpec.Schema.Table, Columns: withExtra}},
			wantStaged:  []bool{false, false}, wantEnsured: 1},
		{name: "evolve refused by the sink: poison, nothing applied", stage: evolving,
			onEnsure:    failNth(1, sinks.Poisonf("cannot add column extra")),
			wantErrType: failure.PoisonBatch, wantInError: []string{"poison batch", "2 batches 0/64:0..0/82:0", "cannot add column extra", "columns changed"},
			wantStaged: []bool{true, true}},
		{name: "evolve fails transiently", stage: evolving, onEnsure: failNth(1, errors.New("catalog unreachable")),
			wantErrType: transient, wantInError: []string{"evolving the target for 2 batches", "catalog unreachable"}, wantStaged: []bool{true, true}},
		{name: "guard: the sink holds a position of another source", stage: one, sinkPos: &otherSource,
			wantErrType: failure.SourceMismatch, wantInError: []string{"shop.orders", "raw.orders", "another source", "different sources", "sluice resume --table shop.orders"},
			wantStaged: []bool{true}},
		{name: "guard: batches of another pipeline", stage: one, table: &Table{Pipeline: "p2", Spec: testSpec, Sink: SinkRef{Name: "lake"}},
			wantErrType: failure.InvalidBatchRef, wantInError: []string{"pipeline p2"}, wantStaged: []bool{true}},
		{name: "poison: the sink refuses the rows", stage: plain,
			onApply:     failNth(1, sinks.Poisonf("column %q of raw.orders is integer, cannot hold %q", "note", "n")),
			wantErrType: failure.PoisonBatch, wantInError: []string{"poison batch", "shop.orders", "3 batches 0/64:0..0/B4:0", "9 rows", "/000000000000006400000000-", "/000000000000008200000000-", "/00000000000000a000000000-", `column "note"`, "no committed position", "send resume"},
			wantStaged: []bool{true, true, true}},
		{name: "poison: a staged file that cannot be decoded", stage: func(t *testing.T, st *staging.Store) []staging.BatchRef {
			return []staging.BatchRef{put(t, st, sp(100, 0), sp(200, 0), 3, bytes.NewBufferString("not an arrow file"))}
		},
			sinkPos:     ptr(sp(90, 0)),
			wantErrType: failure.PoisonBatch, wantInError: []string{"poison batch", "decoding staged file", "committed position 0/5A:0"},
			wantStaged: []bool{true}},
		{name: "transient: Apply fails", stage: one, onApply: failNth(1, errors.New("connection reset by peer")),
			wantErrType: transient, wantInError: []string{"applying batch 0/64:0..0/C8:0 of table shop.orders", "connection reset"}, wantStaged: []bool{true}},
		{name: "transient: the position cannot be read", stage: one, onPosition: func(int, *fakeSink) error { return errors.New("timeout") },
			wantErrType: transient, wantInError: []string{"reading committed position of table shop.orders", "timeout"}, wantStaged: []bool{true}},
		{name: "committed meanwhile: a file gone and covered when read again", stage: plain, removeFile: 1,
			// The concurrent attempt committed the whole group and acknowledged the first file.
			onPosition: func(n int, s *fakeSink) error {
				if n >= 2 {
					s.pos, s.hasPos = sp(180, 0), true
				}
				return nil
			},
			wantResult: Result{Position: sp(180, 0), Dropped: 9, Skipped: true, Refs: 3}, wantStaged: []bool{false, false, false}},
		{name: "committed meanwhile, three times: transient", stage: one, removeFile: 1,
			onPosition: func(n int, s *fakeSink) error {
				s.pos, s.hasPos = sp(50, 0), true // committed below the batch on every first read...
				if n%2 == 0 {
					s.pos = sp(200, 0) // ...and covering it on every second one
				}
				return nil
			},
			wantErrType: transient, wantInError: []string{"concurrent attempt", "three times"}, wantStaged: []bool{false}},
		{name: "staged file missing: a batch not committed is no longer staged", stage: plain, removeFile: 2,
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
			sink := &fakeSink{onPosition: tt.onPosition, onApply: tt.onApply, onEnsure: tt.onEnsure}
			if tt.sinkPos != nil {
				sink.pos, sink.hasPos = *tt.sinkPos, true
			}
			table := testTable
			if tt.table != nil {
				table = *tt.table
			}
			e := &Engine{Staging: st}
			got, err := e.Commit(ctx, sink, table, refs, nil)
			checkErr(t, err, tt.wantErrType, tt.wantInError)
			if err == nil {
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

// checkErr checks err against a failure type: "" wants none, transient an unmarked error.
func checkErr(t *testing.T, err error, wantType string, wantIn []string) {
	t.Helper()
	switch {
	case wantType == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case wantType == "":
		return
	case err == nil:
		t.Fatalf("no error, want %s", wantType)
	case wantType == transient && failure.Is(err):
		t.Errorf("error %v is marked %q, want a transient one", err, failure.TypeOf(err))
	case wantType != transient && failure.TypeOf(err) != wantType:
		t.Errorf("error %v is of type %q, want %s", err, failure.TypeOf(err), wantType)
	}
	for _, w := range wantIn {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// TestStoredPosition covers the checks of a target's stored position against the pipeline.
func TestStoredPosition(t *testing.T) {
	t.Parallel()
	src := testSource
	tests := []struct {
		name        string
		stored      *batch.SourcePosition
		table       Table
		posErr      error
		wantErrType string
		wantInError []string
	}{
		{name: "no position", table: Table{Spec: testSpec, Source: &src, SlotSince: 500}},
		{name: "same source, after the slot", stored: ptr(sp(600, 0)), table: Table{Spec: testSpec, Source: &src, SlotSince: 500}},
		{name: "source unknown: any position", stored: &otherSource, table: Table{Spec: testSpec}},
		{name: "another source", stored: &otherSource, table: Table{Spec: testSpec, Source: &src},
			wantErrType: failure.SourceMismatch, wantInError: []string{"another source", "raw.orders"}},
		{name: "older than the slot", stored: ptr(sp(400, 0)), table: Table{Spec: testSpec, Source: &src, SlotSince: 500},
			wantErrType: failure.PositionGap, wantInError: []string{"older than replication slot sluice_p1", "0/1F4", "sluice resync"}},
		{name: "the sink fails", posErr: errors.New("timeout"), table: Table{Spec: testSpec},
			wantErrType: transient, wantInError: []string{"reading committed position", "timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sink := &fakeSink{onPosition: func(int, *fakeSink) error { return tt.posErr }}
			if tt.stored != nil {
				sink.pos, sink.hasPos = *tt.stored, true
			}
			_, _, err := StoredPosition(context.Background(), sink, tt.table)
			checkErr(t, err, tt.wantErrType, tt.wantInError)
		})
	}
}
