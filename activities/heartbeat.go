package activities

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// Heartbeats is a worker interceptor that heartbeats for every activity scheduled with a
// heartbeat timeout that does not heartbeat by itself, so a killed worker is noticed after the
// heartbeat timeout (seconds) rather than the start-to-close timeout (minutes), without each
// short activity (TableSchema, EnsureTable, LoadTable, ...) keeping its own ticker. It proves
// only that the worker is alive, which is what a lost worker's detection needs.
//
// It stays out of the way of activities that heartbeat themselves: it stops for good once the
// activity records a heartbeat of its own, and never starts when an earlier attempt left
// heartbeat details, so it never overwrites details an activity resumes from.
type Heartbeats struct {
	interceptor.WorkerInterceptorBase
	// Every is how often it heartbeats; 0 means a quarter of the activity's heartbeat timeout,
	// at most 5 seconds.
	Every time.Duration
}

// InterceptActivity wraps one activity execution.
func (h *Heartbeats) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &heartbeatInbound{every: h.Every}
	i.Next = next
	return i
}

type heartbeatInbound struct {
	interceptor.ActivityInboundInterceptorBase
	every time.Duration
	out   *heartbeatOutbound
}

func (i *heartbeatInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	i.out = &heartbeatOutbound{}
	i.out.Next = outbound
	return i.Next.Init(i.out)
}

func (i *heartbeatInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	timeout := activity.GetInfo(ctx).HeartbeatTimeout
	if timeout <= 0 || activity.HasHeartbeatDetails(ctx) {
		return i.Next.ExecuteActivity(ctx, in)
	}
	every := i.every
	if every <= 0 {
		every = min(timeout/4, 5*time.Second)
	}
	stop := beatEvery(ctx, every, func() bool {
		if i.out.own.Load() {
			return false // the activity heartbeats by itself now
		}
		i.out.Next.RecordHeartbeat(ctx)
		return true
	})
	defer stop()
	return i.Next.ExecuteActivity(ctx, in)
}

// heartbeatOutbound notes that the activity heartbeats by itself.
type heartbeatOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	own atomic.Bool
}

func (o *heartbeatOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	o.own.Store(true)
	o.Next.RecordHeartbeat(ctx, details...)
}

// beatEvery calls beat every interval until beat returns false, ctx ends or the returned stop
// is called; stop waits for the goroutine to end.
func beatEvery(ctx context.Context, every time.Duration, beat func() bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if !beat() {
					return
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// beatInterval is how often a long activity (a copy, a snapshot, the reader) repeats its last heartbeat details.
const beatInterval = 2 * time.Second

// repeatedBeat heartbeats the last recorded details of a copy every beatInterval until stop,
// so a sink write or a chunk read longer than the heartbeat timeout does not time the attempt
// out. It repeats only details the activity recorded (or those it started from): a retried
// attempt resumes from what was applied.
type repeatedBeat[T any] struct {
	send     func(context.Context, T) // activity.RecordHeartbeat
	mu       sync.Mutex
	last     T
	stopLoop func()
}

// startBeat starts sending from (until record reports other details) every every.
func startBeat[T any](ctx context.Context, from T, every time.Duration, send func(context.Context, T)) *repeatedBeat[T] {
	b := &repeatedBeat[T]{send: send, last: from}
	b.stopLoop = beatEvery(ctx, every, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.send(ctx, b.last)
		return true
	})
	return b
}

// record heartbeats v now and keeps repeating it. v must not change afterwards (clone a slice the
// activity reuses).
func (b *repeatedBeat[T]) record(ctx context.Context, v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = v
	b.send(ctx, v)
}

func (b *repeatedBeat[T]) stop() { b.stopLoop() }

// sendHeartbeat records v as the activity's heartbeat.
func sendHeartbeat[T any](ctx context.Context, v T) { activity.RecordHeartbeat(ctx, v) }
