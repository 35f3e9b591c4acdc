package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/reader"
	"github.com/sluicecdc/sluice/staging"
	"github.com/sluicecdc/sluice/testkit/race"
)

// The test environment does not count history events, so historyModel counts them from what the
// workflow does, conservatively (every step taken to cost its own workflow task), and feeds the
// count back as the run's history length: the workflow's budget logic sees what it would see on
// a server.
const (
	eventsStart    = 4 // WorkflowExecutionStarted and the first workflow task
	eventsActivity = 6 // scheduled, started, closed, and a workflow task
	eventsTimer    = 5 // started, fired or canceled, and a workflow task
	eventsSignal   = 4 // signaled, and a workflow task
	eventsUpsert   = 1
)

// historyModel is a worker interceptor counting one run's history events and the largest
// activity input it saw.
type historyModel struct {
	interceptor.WorkerInterceptorBase
	env      *testsuite.TestWorkflowEnvironment
	events   int
	maxInput int
}

func (m *historyModel) add(n int) {
	m.events += n
	m.env.SetCurrentHistoryLength(m.events)
}

func (m *historyModel) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	m.add(eventsStart)
	return &modelInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, m: m}
}

type modelInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	m *historyModel
}

func (i *modelInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&modelOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, m: i.m})
}

func (i *modelInbound) HandleSignal(ctx workflow.Context, in *interceptor.HandleSignalInput) error {
	i.m.add(eventsSignal)
	return i.Next.HandleSignal(ctx, in)
}

type modelOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	m *historyModel
}

// ExecuteActivity counts the events of an activity and measures its input. The JSON encoding
// measures, it decides nothing the workflow does.
//
//workflowcheck:ignore
func (o *modelOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.m.add(eventsActivity)
	for _, a := range args {
		if b, err := json.Marshal(a); err == nil {
			o.m.maxInput = max(o.m.maxInput, len(b))
		}
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *modelOutbound) AwaitWithTimeout(ctx workflow.Context, d time.Duration, cond func() bool) (bool, error) {
	o.m.add(eventsTimer)
	return o.Next.AwaitWithTimeout(ctx, d, cond)
}

func (o *modelOutbound) NewTimer(ctx workflow.Context, d time.Duration) workflow.Future {
	o.m.add(eventsTimer)
	return o.Next.NewTimer(ctx, d)
}

func (o *modelOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, attrs ...temporal.SearchAttributeUpdate) error {
	o.m.add(eventsUpsert)
	return o.Next.UpsertTypedSearchAttributes(ctx, attrs...)
}

// runStats is one run of a chain.
type runStats struct {
	events     int // modelled history events
	maxInput   int // largest activity input, JSON bytes
	nextInput  int // the continue-as-new input, bytes (0 for the last run)
	lastStatus TableStatus
}

// chain runs a TableWorkflow's runs one after another, each continue-as-new input starting the
// next, until a run ends otherwise (the test's cancellation at stopAt); setup registers each
// run's callbacks. It returns the stats of every run and the last run's error.
func chain(t *testing.T, w *world, in TableInput, stopAt time.Duration, setup func(*testsuite.TestWorkflowEnvironment)) ([]runStats, error) {
	t.Helper()
	var runs []runStats
	for {
		env := newEnv(t, w, time.Millisecond)
		m := &historyModel{env: env}
		env.SetWorkerOptions(worker.Options{EnableSessionWorker: true, Interceptors: []interceptor.WorkerInterceptor{m}})
		env.SetTestTimeout(2 * time.Minute) // listing 20,000 refs in the world is slow under -race
		if setup != nil {
			setup(env)
		}
		err := finish(t, env, in, stopAt)
		st := runStats{events: m.events, maxInput: m.maxInput, lastStatus: queryStatus(t, env)}
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			runs = append(runs, st)
			return runs, err
		}
		for _, p := range can.Input.GetPayloads() {
			st.nextInput += len(p.GetData())
		}
		runs = append(runs, st)
		var next TableInput
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
			t.Fatal(err)
		}
		in = next
		if len(runs) > 1000 {
			t.Fatal("more than 1000 runs")
		}
	}
}

// checkBudget asserts every run kept the budget and the payloads small.
func checkBudget(t *testing.T, runs []runStats, maxResult int) {
	t.Helper()
	var maxEvents, maxNext, maxInput int
	for i, r := range runs {
		if r.events > MaxRunEvents {
			t.Errorf("run %d had %d history events, over the budget of %d", i, r.events, MaxRunEvents)
		}
		maxEvents, maxNext, maxInput = max(maxEvents, r.events), max(maxNext, r.nextInput), max(maxInput, r.maxInput)
	}
	if maxNext > 4<<10 {
		t.Errorf("a continue-as-new input has %d bytes: it carries something that grows", maxNext)
	}
	if maxInput > MaxPayloadBytes || maxResult > MaxPayloadBytes {
		t.Errorf("largest activity input %d bytes, result %d: over the payload budget of %d", maxInput, maxResult, MaxPayloadBytes)
	}
	t.Logf("%d runs; most events in a run %d; largest continue-as-new input %d B, activity input %d B, activity result %d B",
		len(runs), maxEvents, maxNext, maxInput, maxResult)
}

// checkApplied asserts the sink applied exactly want, in order.
func checkApplied(t *testing.T, w *world, want []string) {
	t.Helper()
	applied, _, _ := w.snapshotOf()
	if len(applied) != len(want) {
		t.Fatalf("applied %d batches, want %d", len(applied), len(want))
	}
	for i := range want {
		if applied[i] != want[i] {
			t.Fatalf("batch %d applied as %s, want %s: out of order, skipped or repeated", i, applied[i], want[i])
		}
	}
	if len(w.staged) != 0 {
		t.Fatalf("%d batches still staged", len(w.staged))
	}
}

// maxResultOf is the largest JSON of the listing results the world returned.
func (w *world) maxResultOf() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxResult
}

// scaledForRace returns n, or under the race detector a quarter of it with in's runs a quarter
// as long (MaxHistoryEvents): as many continue-as-new hand-overs, at a quarter of the detector's
// cost.
func scaledForRace(n int, in *TableInput) int {
	if !race.Enabled {
		return n
	}
	in.Options.MaxHistoryEvents = ContinueAsNewAtEvents / 4
	return n / 4
}

func TestTableWorkflowBacklogStaysWithinBudget(t *testing.T) {
	t.Parallel()
	in := TableInput{TableConfig: testTable}
	n := scaledForRace(20_000, &in)
	w := newWorld(true, 0)
	var want []string
	for i := range n {
		r := ref(uint64(i*10+1), uint64(i*10+10))
		w.staged[r.URI] = r
		want = append(want, appliedAs(r))
	}
	runs, err := chain(t, w, in, 1000*time.Hour, nil)
	if !temporal.IsCanceledError(err) {
		t.Fatalf("last run ended with %v, want the test's cancellation", err)
	}
	checkApplied(t, w, want)
	checkBudget(t, runs, w.maxResultOf())
	// Grouped commits: the backlog commits in far fewer CommitBatch calls than batches, each
	// batch given to exactly one.
	_, calls, _ := w.snapshotOf()
	commits := 0
	for _, c := range calls {
		if c == "CommitBatch" {
			commits++
		}
	}
	if commits > n/GroupRefs*2 {
		t.Errorf("%d batches took %d CommitBatch calls (groups of up to %d, the largest %d), want at most %d", n, commits, GroupRefs, w.maxGroup, n/GroupRefs*2)
	}
	for uri, k := range w.given {
		if k != 1 {
			t.Errorf("batch %s was given to %d commits, want 1", uri, k)
		}
	}
	if len(w.given) != n {
		t.Errorf("%d batches were given to a commit, want %d", len(w.given), n)
	}
	t.Logf("%d batches committed in %d CommitBatch calls (largest group %d)", n, commits, w.maxGroup)
	if st := runs[0].lastStatus; int64(st.QueueLength) != int64(n)-st.Batches || st.LagBytes != uint64(n*10)-st.Position.Position.LSN {
		t.Errorf("status at the end of the first run: %d batches committed, queue %d, lag %d bytes; want the rest queued and lagging",
			st.Batches, st.QueueLength, st.LagBytes)
	}
}

func TestTableWorkflowLongOutageRetriesWithinBudget(t *testing.T) {
	t.Parallel()
	const staged, signalled = 300, 2000
	w := newWorld(true, 0)
	var want []string
	for i := range staged + signalled {
		r := ref(uint64(i*10+1), uint64(i*10+10))
		if i < staged {
			w.staged[r.URI] = r
		}
		want = append(want, appliedAs(r))
	}
	// The sink is down for the first 12,000 commit attempts: with the bounded attempts and the
	// workflow's backoff, about two days. Under the race detector an eighth (the runs a quarter
	// as long, scaledForRace): each attempt's input (the queued batches, 50 KB) is decoded from
	// JSON twice by the test environment's mock, which under the detector took 24 of the test's
	// 68 seconds at a quarter; at an eighth the test takes 39 s and the outage still spans ten
	// runs (2026-12-05).
	in := TableInput{TableConfig: testTable}
	failing := scaledForRace(12_000, &in)
	if race.Enabled {
		failing /= 2
	}
	w.commitFails = func(time.Time) bool {
		failing--
		return failing >= 0
	}
	sent := staged
	var sawError bool
	runs, err := chain(t, w, in, 1000*time.Hour, func(env *testsuite.TestWorkflowEnvironment) {
		// The reader stages and signals a batch every 30 seconds meanwhile.
		var tick func()
		tick = func() {
			if sent < staged+signalled {
				r := ref(uint64(sent*10+1), uint64(sent*10+10))
				w.mu.Lock()
				w.staged[r.URI] = r
				w.mu.Unlock()
				sent++
				env.SignalWorkflow(SignalBatch, r)
				env.RegisterDelayedCallback(tick, 30*time.Second)
			}
			if st := queryStatus(t, env); st.LastError != "" {
				sawError = true
			}
		}
		env.RegisterDelayedCallback(tick, 30*time.Second)
	})
	if !temporal.IsCanceledError(err) {
		t.Fatalf("last run ended with %v, want the test's cancellation", err)
	}
	if failing >= 0 {
		t.Fatalf("the outage did not end: %d failing attempts left", failing)
	}
	if !sawError {
		t.Error("the status never showed the outage's last error")
	}
	if len(runs) < 3 {
		t.Errorf("the outage took %d runs; want it to continue as new several times", len(runs))
	}
	checkApplied(t, w, want)
	checkBudget(t, runs, w.maxResultOf())
}

func TestTableWorkflowLongPauseWithinBudget(t *testing.T) {
	t.Parallel()
	const signalled = 6000
	w := newWorld(true, 0)
	var want []string
	for i := range signalled {
		want = append(want, appliedAs(ref(uint64(i*10+1), uint64(i*10+10))))
	}
	sent := 0
	first := true
	runs, err := chain(t, w, TableInput{TableConfig: testTable}, 1000*time.Hour, func(env *testsuite.TestWorkflowEnvironment) {
		if first {
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPause, nil) }, 0)
			first = false
		}
		var tick func()
		tick = func() {
			if sent == signalled {
				env.SignalWorkflow(SignalResume, nil)
				return
			}
			if st := queryStatus(t, env); !st.Paused || st.Phase == StateStream {
				t.Errorf("while paused: status %+v", st)
			}
			// The reader coalesces: a few batches a signal.
			var refs []staging.BatchRef
			for range min(3, signalled-sent) {
				r := ref(uint64(sent*10+1), uint64(sent*10+10))
				w.mu.Lock()
				w.staged[r.URI] = r
				w.mu.Unlock()
				sent++
				refs = append(refs, r)
			}
			env.SignalWorkflow(SignalBatches, refs)
			env.RegisterDelayedCallback(tick, time.Second)
		}
		env.RegisterDelayedCallback(tick, time.Second)
	})
	if !temporal.IsCanceledError(err) {
		t.Fatalf("last run ended with %v, want the test's cancellation", err)
	}
	if len(runs) < 2 {
		t.Errorf("the pause took %d runs; want it to continue as new", len(runs))
	}
	checkApplied(t, w, want)
	checkBudget(t, runs, w.maxResultOf())
}

func TestTableWorkflowListingFailureRetriesAndSkipsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(true, 0)
	var want []string
	for i := range 600 {
		r := ref(uint64(i*10+1), uint64(i*10+10))
		w.staged[r.URI] = r
		want = append(want, appliedAs(r))
	}
	w.listFails = 3 // the staging store fails the first relistings
	runs, err := chain(t, w, TableInput{TableConfig: testTable}, 1000*time.Hour, func(env *testsuite.TestWorkflowEnvironment) {
		// Signals of already staged batches beyond the window while it relists.
		env.RegisterDelayedCallback(func() {
			for i := 590; i < 600; i++ {
				env.SignalWorkflow(SignalBatch, ref(uint64(i*10+1), uint64(i*10+10)))
			}
		}, time.Millisecond)
	})
	if !temporal.IsCanceledError(err) {
		t.Fatalf("last run ended with %v", err)
	}
	checkApplied(t, w, want)
	checkBudget(t, runs, w.maxResultOf())
}

// appliedAs is how the world records a batch applied whole: "lo..hi".
func appliedAs(r staging.BatchRef) string {
	return fmt.Sprintf("%d..%d", r.Lo.Position.LSN, r.Hi.Position.LSN)
}

// TestSignalPayloadWithinBudget checks that the reader's fullest coalesced signal (MaxSignalRefs
// refs of the longest kind: a staging URI under a deep prefix, every field set) stays well inside
// the payload budget.
func TestSignalPayloadWithinBudget(t *testing.T) {
	t.Parallel()
	refs := make([]staging.BatchRef, reader.MaxSignalRefs)
	for i := range refs {
		r := ref(uint64(1<<40+i*1000), uint64(1<<40+i*1000+999))
		r.URI = "s3://a-bucket-name-of-some-length/and/a/deep/prefix/for/the/staging/area/" + r.URI
		r.Bytes, r.FirstCommit = 64<<20, time.Date(2026, 12, 1, 0, 0, 0, 123456789, time.UTC)
		refs[i] = r
	}
	b, err := json.Marshal(refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxPayloadBytes/4 {
		t.Errorf("a signal of %d refs is %d bytes of JSON; want at most a quarter of the %d-byte payload budget", len(refs), len(b), MaxPayloadBytes)
	}
	t.Logf("a full signal: %d refs, %d bytes", len(refs), len(b))
}
