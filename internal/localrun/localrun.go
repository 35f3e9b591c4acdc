// Package localrun runs Sluice the way a user does, on one machine: it builds the worker and the
// starter CLI, runs workers as processes (so they can be killed), runs starter commands, waits on
// a table's status through Temporal, and reads back an Iceberg target. The demo and the
// end-to-end tests share it.
package localrun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/workflows"
)

// Binaries are the built worker and starter.
type Binaries struct {
	Worker  string // sluice-worker
	Starter string // sluice
}

// Build builds the worker and the starter from the module at root into dir.
func Build(ctx context.Context, root, dir string) (Binaries, error) {
	b := Binaries{Worker: filepath.Join(dir, "sluice-worker"), Starter: filepath.Join(dir, "sluice")}
	for pkg, out := range map[string]string{"./worker": b.Worker, "./starter": b.Starter} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("building %s: %w\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

// Worker is a running worker process.
type Worker struct {
	cmd  *exec.Cmd
	Log  string
	done chan error
}

// StartWorker runs the worker binary with the config file and extra environment, its output in
// logPath.
func StartWorker(bin, configPath, logPath string, env []string) (*Worker, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening worker log: %w", err)
	}
	cmd := exec.Command(bin, "--config", configPath, "--metrics-addr", "127.0.0.1:0", "--shutdown-grace", "5s")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting worker %s: %w", bin, err)
	}
	w := &Worker{cmd: cmd, Log: logPath, done: make(chan error, 1)}
	go func() { w.done <- cmd.Wait(); logf.Close() }()
	return w, nil
}

// PID is the worker's process id.
func (w *Worker) PID() int { return w.cmd.Process.Pid }

// Stop asks the worker to shut down (SIGTERM) and waits for it.
func (w *Worker) Stop() error { return w.signal(syscall.SIGTERM, 30*time.Second) }

// Kill kills the worker at once (SIGKILL), as a crash would.
func (w *Worker) Kill() error { return w.signal(syscall.SIGKILL, 10*time.Second) }

func (w *Worker) signal(sig syscall.Signal, wait time.Duration) error {
	_ = w.cmd.Process.Signal(sig)
	select {
	case <-w.done:
		return nil
	case <-time.After(wait):
		_ = w.cmd.Process.Kill()
		return fmt.Errorf("worker %d did not exit %s after %s", w.PID(), wait, sig)
	}
}

// Sluice runs the starter CLI with args and returns its output.
func Sluice(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("sluice %s: %w\n%s", strings.Join(args, " "), err, out.String())
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
// error names what was awaited and the last state check reported.
func WaitFor(ctx context.Context, what string, timeout, interval time.Duration, check func(ctx context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		ok, state, err := check(ctx)
		if err == nil && ok {
			return nil
		}
		if err != nil {
			state = err.Error()
		}
		last = state
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: not reached after %s (last: %s)", what, timeout, last)
		case <-time.After(interval):
		}
	}
}
