package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
)

// healthEvery is how often the worker checks that it reaches Temporal; healthGrace is how long
// a failing check is tolerated before /healthz fails (a frontend restart or one slow answer is
// not worth a restart of the worker).
const (
	healthEvery = 5 * time.Second
	healthGrace = 15 * time.Second
)

// health is what /healthz and /readyz answer: whether the worker reaches Temporal and still
// polls its task queue. Safe for concurrent use.
type health struct {
	mu       sync.Mutex
	started  bool      // the worker polls its task queue
	fatal    error     // the worker stopped polling for good
	lastOK   time.Time // the last successful check of Temporal
	lastErr  error     // the last check's error, nil when it succeeded
	failedAt time.Time // when checks began to fail
	now      func() time.Time
}

func newHealth() *health { return &health{now: time.Now} }

// watch checks Temporal every healthEvery until ctx ends.
func (h *health) watch(ctx context.Context, tc client.Client) {
	check := func() {
		cctx, cancel := context.WithTimeout(ctx, healthEvery)
		defer cancel()
		_, err := tc.CheckHealth(cctx, &client.CheckHealthRequest{})
		h.checked(err)
	}
	every(ctx, healthEvery, check)
}

func (h *health) checked(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	switch {
	case err == nil:
		h.lastOK, h.lastErr, h.failedAt = now, nil, time.Time{}
	case h.lastErr == nil:
		h.lastErr, h.failedAt = err, now
	default:
		h.lastErr = err
	}
}

func (h *health) setStarted() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = true
}

func (h *health) setFatal(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fatal = err
}

// problem is why the worker is not healthy ("" when it is): it stopped polling, or Temporal
// has not answered for longer than healthGrace. ready also wants the worker started and the
// last check of Temporal passed.
func (h *health) problem(ready bool) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.fatal != nil:
		return fmt.Sprintf("the worker stopped polling its task queue: %v", h.fatal)
	case h.lastErr != nil && (ready || h.now().Sub(h.failedAt) > healthGrace):
		return fmt.Sprintf("Temporal unreachable since %s: %v", h.failedAt.UTC().Format(time.RFC3339), h.lastErr)
	case ready && !h.started:
		return "the worker has not started polling yet"
	case ready && h.lastOK.IsZero():
		return "Temporal not checked yet"
	}
	return ""
}

// handler answers 200 "ok" or 503 with the problem.
func (h *health) handler(ready bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if p := h.problem(ready); p != "" {
			http.Error(w, p, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}
