// Package localrun runs Sluice the way a user does, on one machine: it builds the worker and the
// starter CLI, runs workers as processes (so they can be killed), runs starter commands, waits on
// a table's status through Temporal, and reads back an Iceberg target. The demo and the
// end-to-end tests share it.
//
// Every process it starts is tied to the process that started it: on Linux the kernel SIGKILLs
// it when that process dies (Pdeathsig), so a test binary killed by go test's -timeout takes its
// workers with it instead of leaving them writing into their sinks; each child leads a process
// group of its own, which is killed with it. Elsewhere the children only get their own group.
package localrun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/workflows"
)

// Binaries are the built worker and starter.
type Binaries struct {
	Worker  string // sluice-worker
	Starter string // sluice
}

// FaultsTag is the build tag that compiles the fault points (package internal/faults) into the
// worker. The end-to-end tests build with it; the demo and the benchmark build as the product
// ships, without.
const FaultsTag = "faults"

// Build builds the worker and the starter from the module at root into dir, with the build tags.
// The two builds run at once: each ends in a link, which uses one core.
func Build(ctx context.Context, root, dir string, tags ...string) (Binaries, error) {
	b := Binaries{Worker: filepath.Join(dir, "sluice-worker"), Starter: filepath.Join(dir, "sluice")}
	var g errgroup.Group
	for pkg, out := range map[string]string{"./worker": b.Worker, "./starter": b.Starter} {
		g.Go(func() error {
			cmd := exec.CommandContext(ctx, "go", "build", "-tags", strings.Join(tags, ","), "-o", out, pkg)
			cmd.Dir = root
			if msg, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("building %s: %w\n%s", pkg, err, msg)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Binaries{}, err
	}
	return b, nil
}

// Worker is a running worker process, the leader of its own process group.
type Worker struct {
	cmd  *exec.Cmd
	Log  string
	done chan struct{} // closed once the worker has exited and was reaped

	mu     sync.Mutex
	exited bool // the worker has exited: its pid may be reused, so it is never signalled again
}

// StartWorker runs the worker binary with the config file, extra environment and extra
// arguments (after the config and the metrics address), its output in logPath.
func StartWorker(bin, configPath, logPath string, env []string, args ...string) (*Worker, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening worker log: %w", err)
	}
	cmd := exec.Command(bin, append([]string{"--config", configPath, "--metrics-addr", "127.0.0.1:0", "--shutdown-grace", "5s"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	w := &Worker{cmd: cmd, Log: logPath, done: make(chan struct{})}
	exited := func(zombie bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.exited = true
		if zombie { // its pid, and so its group's id, is still reserved: kill what is left of the group
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	wait, err := startTied(cmd, exited)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting worker %s: %w", bin, err)
	}
	go func() { <-wait; logf.Close(); close(w.done) }()
	return w, nil
}

// startTied starts cmd as the leader of a new process group, tied to this process (see the
// package doc), and returns a channel that receives cmd.Wait's error. exited is called once
// the child has exited: before it is reaped (zombie true: its pid cannot be reused yet) where
// the OS allows waiting without reaping, else after.
//
// Pdeathsig fires when the thread that started the child exits, not the process: the Go runtime
// ends a thread when a goroutine locked to it returns. So the child is started and waited for
// by a goroutine locked to its thread until the child is gone; no other goroutine runs on that
// thread meanwhile, so it outlives the child unless the whole process dies.
func startTied(cmd *exec.Cmd, exited func(zombie bool)) (<-chan error, error) {
	cmd.SysProcAttr = tiedProcAttr()
	started, done := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		zombie := waitExitNoReap(cmd.Process.Pid) == nil
		if zombie {
			exited(true)
		}
		err := cmd.Wait()
		if !zombie {
			exited(false)
		}
		done <- err
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

// PID is the worker's process id.
func (w *Worker) PID() int { return w.cmd.Process.Pid }

// Done is closed once the worker has exited (however it ended) and was reaped.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Stop asks the worker to shut down (SIGTERM) and waits for it; a worker that does not exit
// within 30 seconds is killed with its process group. Stopping an exited worker returns nil
// at once, so a test may kill a worker and still Stop it at cleanup.
func (w *Worker) Stop() error { return w.signal(syscall.SIGTERM, 30*time.Second) }

// Kill kills the worker at once (SIGKILL), as a crash would, with its process group, and waits
// for it.
func (w *Worker) Kill() error { return w.signal(syscall.SIGKILL, 10*time.Second) }

// signal sends sig to the worker (SIGKILL: to its process group) unless it has exited, and
// waits up to wait for it to exit, then kills its group.
func (w *Worker) signal(sig syscall.Signal, wait time.Duration) error {
	pid := w.PID()
	if sig == syscall.SIGKILL {
		pid = -pid
	}
	if !w.send(pid, sig) {
		<-w.done
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-time.After(wait):
		w.send(-w.PID(), syscall.SIGKILL)
		return fmt.Errorf("worker %d did not exit %s after %s", w.PID(), wait, sig)
	}
}

// send signals pid (negative: a process group) unless the worker has exited; it reports
// whether it did.
func (w *Worker) send(pid int, sig syscall.Signal) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.exited {
		return false
	}
	_ = syscall.Kill(pid, sig)
	return true
}

// Sluice runs the starter CLI with args and returns its output.
func Sluice(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	return Run(ctx, bin, env, args...)
}

// Run runs the command bin with args and extra environment, tied to this process like a worker
// (see the package doc), and returns its combined output; the error names the command.
func Run(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	wait, err := startTied(cmd, func(bool) {})
	if err == nil {
		err = <-wait
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// TableStatus queries the status of a table workflow's run that is running and started after
// since (a query of a closed run would answer with that run's last state).
func TableStatus(ctx context.Context, c client.Client, pipeline string, table batch.TableName, since time.Time) (workflows.TableStatus, error) {
	var st workflows.TableStatus
	id := workflows.TableWorkflowID(pipeline, table)
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return st, err
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetStartTime().AsTime().Before(since) {
		return st, fmt.Errorf("workflow %s has no run started since %s that is running (latest: %s)",
			id, since.Format(time.TimeOnly), info.GetStatus())
	}
	resp, err := c.QueryWorkflow(ctx, id, info.GetExecution().GetRunId(), workflows.QueryStatus)
	if err != nil {
		return st, err
	}
	err = resp.Get(&st)
	return st, err
}

// WaitFor polls check every interval until it returns true, ctx ends or timeout passes; the
// error names what was awaited and the last state check reported. The pause after a check is
// at least as long as the check took, so that a costly check (a full scan of a source and a
// sink) takes at most half of the time it waits, however loaded the machine.
//
// A check is given a context that ends with the wait. One that does not return when its context
// ends (a client that ignores it, such as a bulk read with a timeout of its own) is abandoned
// after checkGrace: WaitFor returns on time whatever the check does, and says the check hung.
func WaitFor(ctx context.Context, what string, timeout, interval time.Duration, check func(ctx context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		ok    bool
		state string
		err   error
	}
	var last string
	for {
		began := time.Now()
		done := make(chan result, 1) // buffered: an abandoned check's send does not block
		go func() {
			ok, state, err := check(ctx)
			done <- result{ok, state, err}
		}()
		var r result
		select {
		case r = <-done:
		case <-ctx.Done():
			select {
			case r = <-done:
			case <-time.After(checkGrace):
				return fmt.Errorf("waiting for %s: not reached after %s (the last check did not return %s after the deadline; the one before: %s)",
					what, timeout, checkGrace, last)
			}
		}
		if r.err == nil && r.ok {
			return nil
		}
		if r.err != nil {
			r.state = r.err.Error()
		}
		last = r.state
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: not reached after %s (last: %s)", what, timeout, last)
		case <-time.After(max(interval, time.Since(began))):
		}
	}
}

// checkGrace is how long WaitFor waits, after its deadline, for a check that ignores its context.
const checkGrace = 10 * time.Second

// MetricsAddr waits up to timeout for the worker to log the address of its /metrics (started
// with --metrics-addr 127.0.0.1:0, it logs the port it was given) and returns it.
func (w *Worker) MetricsAddr(ctx context.Context, timeout time.Duration) (string, error) {
	var addr string
	err := WaitFor(ctx, "the worker to serve its metrics", timeout, 100*time.Millisecond, func(context.Context) (bool, string, error) {
		b, err := os.ReadFile(w.Log)
		if err != nil {
			return false, "", err
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if !strings.Contains(line, `msg="serving metrics"`) {
				continue
			}
			if _, after, ok := strings.Cut(line, " addr="); ok {
				addr, _, _ = strings.Cut(after, " ")
				return true, "", nil
			}
		}
		return false, "no \"serving metrics\" line in " + w.Log + " yet", nil
	})
	return addr, err
}
