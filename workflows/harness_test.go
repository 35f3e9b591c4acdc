package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/backfill"
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/staging"
)

var testSource = batch.SourceID{SystemID: "7312345678901234567", Timeline: 1, Slot: "sluice_p1"}

func sp(lsn uint64) batch.SourcePosition {
	return batch.SourcePosition{Source: testSource, Position: batch.Position{LSN: lsn}}
}

var testTable = activities.TableConfig{
	Pipeline: "p1",
	Spec: sinks.TableSpec{
		Target: "raw.orders",
		Schema: batch.Schema{Table: batch.TableName{Schema: "shop", Name: "orders"}, Columns: testColumns},
	},
	Sink: activities.SinkRef{Name: "lake"},
}

// testColumns are the test table's columns, as SetupSource or TableSchema read them.
var testColumns = []batch.Column{{Name: "id", TypeOID: 20, TypeName: "bigint", TypeMod: -1, NotNull: true, Key: true, Category: "N"}}

// ref is a staged batch of the test table covering [lo, hi].
func ref(lo, hi uint64) staging.BatchRef {
	return staging.BatchRef{
		Pipeline: "p1", Table: testTable.Table(), Lo: sp(lo), Hi: sp(hi), Rows: int64(hi - lo + 1),
		URI: fmt.Sprintf("file:///staging/p1/shop.orders/%d-%d.arrow", lo, hi), Phase: batch.PhaseStream,
	}
}

// world is what the mocked activities share: a sink with a committed position and a staging
// area, behaving as the real CommitBatch does (skip covered, trim overlapping, apply, ack).
type world struct {
	mu        sync.Mutex
	pos       batch.SourcePosition
	hasPos    bool
	staged    map[string]staging.BatchRef
	applied   []string // ranges applied to the sink, in order, "lo..hi" (trimmed from lo' when partly covered)
	calls     []string // activity names in call order
	poison    map[string]error
	chunks    int // chunks the snapshot has
	copied    int // chunks copied by the current snapshot
	loseAt    int // CopySnapshot call (1-based, counted over all snapshots) that loses the session; 0 never
	copyCalls int
	// chunkTime is how long the source takes per chunk: a CopySnapshot slice copies RunFor /
	// chunkTime chunks (at least one); 0 means one chunk per slice.
	chunkTime time.Duration
	slices    []time.Duration // RunFor of every CopySnapshot call
	// cancelledCopies counts CopySnapshot calls that found themselves cancelled.
	cancelledCopies int
	// maxCopies stops a run whose CopySnapshot calls alone would pass the history budget; 0 never.
	maxCopies int
	listFails int // NextBatches calls still to fail
	maxResult int // largest JSON of a LoadTable or NextBatches result
	// commitFails decides whether a CommitBatch attempt fails transiently (nil: never).
	commitFails func(now time.Time) bool
	maxGroup    int            // most batches one CommitBatch was given
	given       map[string]int // how many CommitBatch inputs named each staged file
}

func newWorld(hasPos bool, pos uint64, staged ...staging.BatchRef) *world {
	w := &world{hasPos: hasPos, pos: sp(pos), staged: map[string]staging.BatchRef{}, given: map[string]int{}, poison: map[string]error{}, chunks: 3}
	for _, r := range staged {
		w.staged[r.URI] = r
	}
	return w
}

// stage puts refs into the staging store, as the reader does before it signals them: a
// signalled batch is always staged, and a listing finds it.
func (w *world) stage(refs ...staging.BatchRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range refs {
		w.staged[r.URI] = r
	}
}

func (w *world) call(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, name)
}

func (w *world) commit(_ context.Context, in activities.CommitBatchInput) (activities.CommitBatchResult, error) {
	w.call("CommitBatch")
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.commitFails != nil && w.commitFails(time.Now()) {
		return activities.CommitBatchResult{}, errors.New("sink unavailable: connection refused")
	}
	group := in.Refs
	if len(group) == 0 {
		group = []staging.BatchRef{in.Ref}
	}
	w.maxGroup = max(w.maxGroup, len(group))
	for _, r := range group {
		w.given[r.URI]++
	}
	for _, r := range group {
		if err := w.poison[r.URI]; err != nil {
			return activities.CommitBatchResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("poison batch: table %s, batch %s: %v", r.Table, r.Range(), err), failure.PoisonBatch, err)
		}
	}
	// As CommitBatch does: each batch against the position the ones before it leave, in one
	// commit.
	res := activities.CommitBatchResult{Position: w.pos, Skipped: true, Refs: len(group)}
	for _, r := range group {
		delete(w.staged, r.URI)
		if w.hasPos && !w.pos.Position.Less(r.Hi.Position) {
			continue
		}
		from := r.Lo.Position
		if w.hasPos && !w.pos.Position.Less(from) {
			from = batch.Position{LSN: w.pos.Position.LSN + 1}
		}
		w.applied = append(w.applied, fmt.Sprintf("%d..%d", from.LSN, r.Hi.Position.LSN))
		w.pos, w.hasPos = r.Hi, true
		res.Position, res.Skipped = r.Hi, false
		res.Rows += r.Rows
	}
	return res, nil
}

func (w *world) load(_ context.Context, in activities.LoadTableInput) (activities.LoadTableResult, error) {
	w.call("LoadTable")
	w.mu.Lock()
	defer w.mu.Unlock()
	refs, more, hi := w.windowAfter(w.pos, w.hasPos, in.Window)
	res := activities.LoadTableResult{Position: w.pos, HasPosition: w.hasPos, Staged: refs, More: more, StagedHi: hi}
	w.noteResult(res)
	return res, nil
}

func (w *world) next(_ context.Context, in activities.NextBatchesInput) (activities.NextBatchesResult, error) {
	w.call("NextBatches")
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.listFails > 0 {
		w.listFails--
		return activities.NextBatchesResult{}, errors.New("staging store unavailable")
	}
	refs, more, hi := w.windowAfter(in.After, in.HasPosition, in.Window)
	res := activities.NextBatchesResult{Refs: refs, More: more, StagedHi: hi}
	w.noteResult(res)
	return res, nil
}

// noteResult records the JSON size of a result (w.mu held).
func (w *world) noteResult(res any) {
	if b, err := json.Marshal(res); err == nil {
		w.maxResult = max(w.maxResult, len(b))
	}
}

// windowAfter is what staging.ListWindow returns: the staged refs after pos in commit order, at
// most l.Refs of them, how many more, and the highest hi.
func (w *world) windowAfter(pos batch.SourcePosition, hasPos bool, l activities.WindowLimit) ([]staging.BatchRef, int, batch.SourcePosition) {
	var refs []staging.BatchRef
	var hi batch.SourcePosition
	for _, r := range w.staged {
		if !hasPos || pos.Position.Less(r.Hi.Position) {
			refs = append(refs, r)
			if hi.Position.Less(r.Hi.Position) {
				hi = r.Hi
			}
		}
	}
	slices.SortFunc(refs, staging.Compare)
	limit := l.Refs
	if limit <= 0 {
		limit = activities.DefaultWindowRefs
	}
	if len(refs) <= limit {
		return refs, 0, hi
	}
	return refs[:limit:limit], len(refs) - limit, hi
}

func (w *world) discard(_ context.Context, _ activities.TableConfig) error {
	w.call("DiscardSnapshot")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pos, w.hasPos, w.applied = batch.SourcePosition{}, false, nil
	return nil
}

func (w *world) begin(_ context.Context, _ activities.BeginSnapshotInput) (activities.SnapshotInfo, error) {
	w.call("BeginSnapshot")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.copied = 0
	return activities.SnapshotInfo{Name: "00000003-1", Position: sp(1000), EstimatedRows: int64(w.chunks) * 100}, nil
}

func (w *world) copySnapshot(ctx context.Context, in activities.CopySnapshotInput) (backfill.Cursor, error) {
	w.call("CopySnapshot")
	// A slice the workflow cancelled while it ran (the table paused) learns it at this
	// heartbeat and writes nothing: the test environment drops a cancelled activity's result,
	// so the workflow resumes from the cursor it had.
	activity.RecordHeartbeat(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.copyCalls++
	if ctx.Err() != nil {
		w.cancelledCopies++
		return backfill.Cursor{}, ctx.Err()
	}
	w.slices = append(w.slices, in.RunFor)
	if w.copyCalls == w.loseAt {
		return backfill.Cursor{}, temporal.NewCanceledError("session worker lost")
	}
	if w.maxCopies > 0 && w.copyCalls > w.maxCopies {
		return backfill.Cursor{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("history budget exceeded: CopySnapshot call %d, %d of %d chunks copied", w.copyCalls, w.copied, w.chunks), "HistoryBudget", nil)
	}
	if want := cursorAt(w.copied); !equalStrings(in.After, want) {
		return backfill.Cursor{}, fmt.Errorf("CopySnapshot after %v, want after %v", in.After, want)
	}
	n := 1
	if w.chunkTime > 0 {
		n = max(1, int(in.RunFor/w.chunkTime))
	}
	n = min(n, w.chunks-w.copied)
	w.applied = append(w.applied, fmt.Sprintf("chunks %d-%d", w.copied+1, w.copied+n))
	w.copied += n
	return backfill.Cursor{Rows: int64(n) * 100, Chunks: int64(n), Last: cursorAt(w.copied), Done: w.copied == w.chunks}, nil
}

// cursorAt is the copy cursor after copied chunks of 100 rows.
func cursorAt(copied int) []string {
	if copied == 0 {
		return nil
	}
	return []string{fmt.Sprint(copied * 100)}
}

func (w *world) end(_ context.Context, in activities.EndSnapshotInput) error {
	w.call("EndSnapshot")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pos, w.hasPos = in.Snapshot.Position, true
	return nil
}

func (w *world) snapshotOf() (applied, calls []string, pos batch.SourcePosition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.applied...), append([]string(nil), w.calls...), w.pos
}

// newEnv returns a test environment whose activities act on w. Each activity's mock delays
// completion by step, so signals and queries can interleave with them.
func newEnv(t *testing.T, w *world, step time.Duration) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{EnableSessionWorker: true})
	Register(env)
	activities.Set{Commit: &activities.Commit{}, Backfill: &activities.Backfill{}, Setup: &activities.Setup{}}.Register(env)
	env.OnActivity(setupActs.TableSchema, mock.Anything, mock.Anything).Return(func(_ context.Context, tc activities.TableConfig) (batch.Schema, error) {
		w.call("TableSchema")
		return batch.Schema{Table: tc.Table(), Columns: testColumns}, nil
	})
	env.OnActivity(commitActs.EnsureTable, mock.Anything, mock.Anything).Return(func(_ context.Context, tc activities.TableConfig) error {
		if len(tc.Spec.Schema.Columns) == 0 {
			return fmt.Errorf("EnsureTable of %s without columns", tc.Table())
		}
		w.call("EnsureTable")
		return nil
	})
	env.OnActivity(commitActs.LoadTable, mock.Anything, mock.Anything).Return(w.load)
	env.OnActivity(commitActs.NextBatches, mock.Anything, mock.Anything).Return(w.next)
	env.OnActivity(commitActs.CommitBatch, mock.Anything, mock.Anything).After(step).Return(w.commit)
	env.OnActivity(backfillActs.DiscardSnapshot, mock.Anything, mock.Anything).Return(w.discard)
	env.OnActivity(backfillActs.BeginSnapshot, mock.Anything, mock.Anything).Return(w.begin)
	env.OnActivity(backfillActs.CopySnapshot, mock.Anything, mock.Anything).After(step).Return(w.copySnapshot)
	env.OnActivity(backfillActs.EndSnapshot, mock.Anything, mock.Anything).Return(w.end)
	return env
}

func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) TableStatus {
	t.Helper()
	v, err := env.QueryWorkflow(QueryStatus)
	if err != nil {
		t.Fatalf("status query: %v", err)
	}
	var st TableStatus
	if err := v.Get(&st); err != nil {
		t.Fatalf("decoding status: %v", err)
	}
	return st
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
