// Package plugintest runs plugin binaries for tests: it builds a plugin's main package, starts
// it as a process that announces its address (sdk.AnnounceReady), and kills or stops it, so a
// test reaches the plugin through the real gRPC path with the worker's client
// (sinks/plugin.Open) and can fault it from outside.
package plugintest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/sinks/plugin/sdk"
)

// Build builds the main package pkg (relative to the module root, such as
// ./examples/plugins/postgres) into a temporary directory of t and returns the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building plugin %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Process is a running plugin.
type Process struct {
	// Addr is the host:port the plugin announced.
	Addr string
	// Log is the file holding the plugin's stderr.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
}

// readyTimeout bounds a plugin's start until it announces its address.
const readyTimeout = time.Minute

// Start runs bin with args and env (added to the test's environment) and waits until it prints
// sdk.ReadyLine with its address on stdout. The plugin is killed at the end of the test.
func Start(t testing.TB, bin string, env []string, args ...string) *Process {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "plugin-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting plugin %s: %v", bin, err)
	}
	p := &Process{Log: logf.Name(), cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), sdk.ReadyLine); ok {
				addr <- a
			}
		}
	}()
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() { _ = p.Kill() })
	select {
	case p.Addr = <-addr:
		return p
	case <-p.done:
		t.Fatalf("plugin %s exited before announcing its address:\n%s", bin, p.tail())
	case <-time.After(readyTimeout):
		_ = p.Kill()
		t.Fatalf("plugin %s did not announce its address within %s:\n%s", bin, readyTimeout, p.tail())
	}
	return nil
}

// Kill SIGKILLs the plugin (and its process group) and waits until it is gone.
func (p *Process) Kill() error { return p.signal(syscall.SIGKILL) }

// Stop SIGTERMs the plugin and waits until it exits (or ctx is done).
func (p *Process) Stop(ctx context.Context) error {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Process) signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	<-p.done
	return nil
}

// Done is closed once the plugin has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

func (p *Process) tail() string {
	data, _ := os.ReadFile(p.Log)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}
