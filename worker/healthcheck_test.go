package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHealthcheck runs `sluice-worker healthcheck` against the worker's own health handlers:
// exit status 0 (no error) with a "healthy" line when the endpoint answers 200, an error naming
// the endpoint and the worker's reason when it answers 503, and one naming the address when
// nothing listens.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	h := newHealth()
	h.checked(nil) // Temporal answered once
	mux := http.NewServeMux()
	mux.Handle(healthPath, h.handler(false))
	mux.Handle(readyPath, h.handler(true)) // not started: not ready
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	tests := []struct {
		name string
		args []string
		want string // in the output line, or in the error when wantErr
		fail bool
	}{
		{name: "alive", args: []string{"--metrics-addr", srv.Listener.Addr().String()}, want: "healthy: http://" + srv.Listener.Addr().String() + "/healthz answered ok"},
		{name: "listen address without host", args: []string{"--metrics-addr", ":" + port}, want: "healthy: http://127.0.0.1:" + port + "/healthz"},
		{name: "unspecified host", args: []string{"--metrics-addr", "0.0.0.0:" + port}, want: "healthy: http://127.0.0.1:" + port},
		{name: "not ready", args: []string{"--metrics-addr", srv.Listener.Addr().String(), "--ready"}, fail: true,
			want: "/readyz answered 503 Service Unavailable: the worker has not started polling yet"},
		{name: "nothing listening", args: []string{"--metrics-addr", closedAddr}, fail: true, want: "no answer from http://" + closedAddr + "/healthz"},
		{name: "port 0", args: []string{"--metrics-addr", "127.0.0.1:0"}, fail: true, want: "port 0 is chosen by the worker"},
		{name: "bad address", args: []string{"--metrics-addr", "nowhere"}, fail: true, want: `--metrics-addr "nowhere"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := newCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetArgs(append([]string{"healthcheck", "--timeout", "10s"}, tc.args...))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := cmd.ExecuteContext(ctx)
			switch {
			case tc.fail && err == nil:
				t.Fatalf("healthcheck succeeded (%q), want a failure with %q", out.String(), tc.want)
			case tc.fail && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("healthcheck failed with %q, want %q in it", err, tc.want)
			case tc.fail && strings.Contains(err.Error(), "\n"):
				t.Fatalf("the reason is not one line: %q", err)
			case !tc.fail && err != nil:
				t.Fatalf("healthcheck failed: %v", err)
			case !tc.fail && !strings.Contains(out.String(), tc.want):
				t.Fatalf("healthcheck printed %q, want %q in it", out.String(), tc.want)
			}
		})
	}

	t.Run("ready once started", func(t *testing.T) {
		t.Parallel()
		h := newHealth()
		h.checked(nil)
		h.setStarted()
		srv := httptest.NewServer(h.handler(true))
		t.Cleanup(srv.Close)
		if _, err := healthcheck(context.Background(), srv.Listener.Addr().String(), readyPath); err != nil {
			t.Fatalf("a started worker that reached Temporal is not ready: %v", err)
		}
		h.setFatal(errors.New("namespace not found"))
		_, err := healthcheck(context.Background(), srv.Listener.Addr().String(), readyPath)
		if err == nil || !strings.Contains(err.Error(), "stopped polling its task queue: namespace not found") {
			t.Fatalf("a worker that stopped polling: %v", err)
		}
	})
}
