package tests

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestWorkerHealthcheckCommand runs `sluice-worker healthcheck`, the image's and compose's
// health check (the image has no shell or HTTP client), against a real worker: exit status 0
// with a "healthy" line while the worker polls and reaches Temporal; 1 with the worker's reason
// from /readyz while its connection to Temporal is cut; 0 again once restored; 1 with "no
// answer" once the worker has stopped.
func TestWorkerHealthcheckCommand(t *testing.T) {
	defer parallel(t)()
	px := startProxy(t, testenv.Temporal(t))
	p := newPipelineWith(t, pipelineOptions{Temporal: px.Addr(), Tables: []string{"public.items:raw.items"}, SetupSQL: []string{itemsDDL}})
	w := p.worker("worker")
	ctx := context.Background()
	addr, err := w.MetricsAddr(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// check runs the probe and returns its exit status and its one line of output.
	check := func(ctx context.Context, args ...string) (int, string) {
		out, err := localrun.Run(ctx, bins.Worker, nil, append([]string{"healthcheck", "--metrics-addr", addr, "--timeout", "3s"}, args...)...)
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0, strings.TrimSpace(out)
		case errors.As(err, &exit):
			return exit.ExitCode(), strings.TrimSpace(out)
		}
		t.Fatalf("running sluice-worker healthcheck: %v", err)
		return -1, ""
	}
	waitCheck := func(what string, want int, contains string, args ...string) {
		t.Helper()
		err := localrun.WaitFor(ctx, what, time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
			code, out := check(ctx, args...)
			if strings.Count(out, "\n") > 0 {
				t.Fatalf("healthcheck printed more than one line: %q", out)
			}
			return code == want && strings.Contains(out, contains), out, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	waitCheck("healthcheck --ready to pass", 0, "healthy: http://"+addr+"/readyz answered ok", "--ready")
	if code, out := check(ctx); code != 0 || !strings.Contains(out, "/healthz answered ok") {
		t.Fatalf("healthcheck of a running worker: exit %d, %q", code, out)
	}

	px.Cut()
	waitCheck("healthcheck --ready to fail while Temporal is cut", 1, "/readyz answered 503 Service Unavailable: Temporal unreachable since", "--ready")
	px.Restore()
	waitCheck("healthcheck --ready to pass after Temporal is back", 0, "healthy:", "--ready")

	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	if code, out := check(ctx); code != 1 || !strings.Contains(out, "unhealthy: no answer from http://"+addr+"/healthz") {
		t.Fatalf("healthcheck of a stopped worker: exit %d, %q; want 1 and no answer", code, out)
	}
}
