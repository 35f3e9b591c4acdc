package couchbase

import (
	"strconv"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks/sinktest"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	src := sinktest.Source.String()
	at := func(lsn uint64) batch.Position { return batch.Position{LSN: lsn, Seq: 1} }
	fenced := func(st docState, lsn uint64, src string) docState {
		st.xattr, st.fenced, st.fence = true, true, newFence(at(lsn).String(), src)
		return st
	}
	live, tomb := docState{exists: true}, docState{exists: true, deleted: true}
	tests := []struct {
		name   string
		st     docState
		upsert bool
		want   step
	}{
		{"absent upsert", docState{}, true, stepInsert},
		{"absent delete", docState{}, false, stepTombstone},
		{"unfenced live upsert", live, true, stepReplace},
		{"unfenced live delete", live, false, stepRemove},
		{"cleared tombstone upsert", docState{exists: true, deleted: true, xattr: true}, true, stepRevive},
		{"older live upsert", fenced(live, 0x100, src), true, stepReplace},
		{"older live delete", fenced(live, 0x100, src), false, stepRemove},
		{"older tombstone upsert", fenced(tomb, 0x100, src), true, stepRevive},
		{"older tombstone delete", fenced(tomb, 0x100, src), false, stepMarkDeleted},
		{"same position rewrites", fenced(live, 0x200, src), true, stepReplace},
		{"newer live skips upsert", fenced(live, 0x300, src), true, stepSkip},
		{"newer live skips delete", fenced(live, 0x300, src), false, stepSkip},
		{"newer tombstone skips upsert", fenced(tomb, 0x300, src), true, stepSkip},
		{"newer snapshot-chunk fence skips", fenced(live, 0x300, ""), true, stepSkip},
		{"newer fence of another source is overwritten", fenced(live, 0x300, "1/1/other"), true, stepReplace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := decide(tc.st, tc.upsert, at(0x200), src)
			if err != nil || got != tc.want {
				t.Errorf("decide = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestFenceStepLosesRaces checks every write of the fence rule against the write that can
// overtake it on the server: the document is read, a newer row is written in between, and the
// write decided from the stale read must fail as a race (not land), after which the rule skips.
// This is what makes the fence hold on gocaves, which ignores the CAS of a body write over a
// tombstone (reviveSpecs).
func TestFenceStepLosesRaces(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := t.Context()
	col := h.sink.collection(h.tgt)
	src := sinktest.Source.String()
	body := func(v string) []byte { return []byte(`{"name":"` + v + `"}`) }
	op := func(key string, lsn uint64, b []byte) docOp {
		return docOp{key: key, body: b, pos: batch.Position{LSN: lsn, Seq: 1}}
	}
	tests := []struct {
		name     string
		before   []byte // the document's first image at 0x100 (nil: a delete, so a tombstone)
		absent   bool   // no document at all before
		stale    []byte // the stale write at 0x200
		newer    []byte // the write at 0x300 between the read and the stale write
		wantStep step
	}{
		{"replace overtaken by a delete", body("a"), false, body("stale"), nil, stepReplace},
		{"remove overtaken by an update", body("a"), false, nil, body("new"), stepRemove},
		{"revive overtaken by a delete", nil, false, body("stale"), nil, stepRevive},
		{"revive overtaken by an insert", nil, false, body("stale"), body("new"), stepRevive},
		{"tombstone move overtaken by an insert", nil, false, nil, body("new"), stepMarkDeleted},
		{"insert overtaken by a delete", nil, true, body("stale"), nil, stepInsert},
		{"insert overtaken by an insert", nil, true, body("stale"), body("new"), stepInsert},
		{"tombstone overtaken by an insert", nil, true, nil, body("new"), stepTombstone},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := strconv.Itoa(1000 + i)
			if !tc.absent {
				if err := h.sink.writeDocs(ctx, h.tgt, []docOp{op(key, 0x80, body("first"))}, src, "", nil); err != nil {
					t.Fatal(err)
				}
				if err := h.sink.writeDocs(ctx, h.tgt, []docOp{op(key, 0x100, tc.before)}, src, "", nil); err != nil {
					t.Fatal(err)
				}
			}
			stale := op(key, 0x200, tc.stale)
			st, err := h.sink.fenceRead(ctx, col, key)
			if err != nil {
				t.Fatal(err)
			}
			next, err := decide(st, stale.body != nil, stale.pos, src)
			if err != nil || next != tc.wantStep {
				t.Fatalf("decide = %v, %v; want %v", next, err, tc.wantStep)
			}
			if err := h.sink.writeDocs(ctx, h.tgt, []docOp{op(key, 0x300, tc.newer)}, src, "", nil); err != nil {
				t.Fatalf("the newer write: %v", err)
			}
			if err := h.sink.fenceStep(ctx, col, stale, src, "", st, next); !raced(err) {
				t.Fatalf("the stale %v after a newer write returned %v, want a lost race", next, err)
			}
			if err := h.sink.writeDocs(ctx, h.tgt, []docOp{stale}, src, "", nil); err != nil {
				t.Fatalf("the stale write, read again: %v", err)
			}
			id, _ := strconv.ParseInt(key, 10, 64)
			doc, ok := h.doc(id)
			switch {
			case tc.newer == nil && ok:
				t.Errorf("key %s = %v, want absent (deleted by the newer write)", key, doc)
			case tc.newer != nil && (!ok || doc["name"] != "new"):
				t.Errorf("key %s = %v (exists %v), want the newer image", key, doc, ok)
			}
			after, err := h.sink.fenceRead(ctx, col, key)
			if err != nil || after.fence.Pos != (batch.Position{LSN: 0x300, Seq: 1}).String() {
				t.Errorf("fence after = %+v, %v; want position 0/300:1", after.fence, err)
			}
		})
	}
}
