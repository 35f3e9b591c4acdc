package localrun

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeWorker writes a script that StartWorker can run as a worker binary: it starts a
// grandchild (sleep) in its own process group, writes "leader grandchild" pids to pidFile,
// then sleeps (or exits at once when exit is true, leaving the grandchild behind).
func fakeWorker(t *testing.T, dir string, exit bool) (bin, pidFile string) {
	t.Helper()
	bin, pidFile = filepath.Join(dir, "fake-worker"), filepath.Join(dir, "pids")
	tail := "wait"
	if exit {
		tail = "exit 0"
	}
	script := fmt.Sprintf("#!/bin/sh\nsleep 300 &\necho $$ $! > %s.tmp\nmv %s.tmp %s\n%s\n", pidFile, pidFile, pidFile, tail)
	// A process forked by a parallel test while the file is open for writing holds it open until
	// it execs, and executing the file then fails with "text file busy": write it under the
	// fork lock, which a fork holds until its child has exec'd (closing the inherited file).
	syscall.ForkLock.RLock()
	err := os.WriteFile(bin, []byte(script), 0o755)
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	return bin, pidFile
}

// readPids waits for the fake worker's pid file.
func readPids(t *testing.T, pidFile string) (leader, grandchild int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			if _, err := fmt.Sscan(string(b), &leader, &grandchild); err != nil {
				t.Fatalf("pid file %q: %v", b, err)
			}
			return leader, grandchild
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake worker wrote no pid file: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGone waits until pid no longer runs (gone, or a zombie nobody reaps), failing with why.
func waitGone(t *testing.T, pid int, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs 10s after %s", pid, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// TestWorkerGroupDiesWithIt checks that killing a worker, or its own exit, takes its whole
// process group with it, and that Stop after either returns at once.
func TestWorkerGroupDiesWithIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		exit bool // the leader exits by itself
	}{{"killed", false}, {"exits by itself", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bin, pidFile := fakeWorker(t, dir, c.exit)
			w, err := StartWorker(bin, "unused.yaml", filepath.Join(dir, "log"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = w.Kill() })
			leader, grandchild := readPids(t, pidFile)
			t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
			if leader != w.PID() {
				t.Fatalf("pid file names %d, the worker is %d", leader, w.PID())
			}
			if !c.exit {
				if err := w.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			waitGone(t, leader, "its exit")
			waitGone(t, grandchild, "its group's leader exited")
			start := time.Now()
			if err := w.Stop(); err != nil || time.Since(start) > time.Second {
				t.Fatalf("Stop of an exited worker: %v after %s, want nil at once", err, time.Since(start))
			}
		})
	}
}

// parentEnv marks the re-executed test binary of TestWorkerDiesWithTheTestProcess.
const parentEnv = "LOCALRUN_TEST_PARENT_DIR"

// TestWorkerDiesWithTheTestProcess runs this test binary again as a stand-in for a go test
// process that starts a worker and is then SIGKILLed (as a -timeout or a killed CI job ends it,
// with no cleanup run): the worker must die with it.
func TestWorkerDiesWithTheTestProcess(t *testing.T) {
	if dir := os.Getenv(parentEnv); dir != "" {
		bin, _ := fakeWorker(t, dir, false)
		w, err := StartWorker(bin, "unused.yaml", filepath.Join(dir, "log"), nil)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		fmt.Println("worker", w.PID())
		time.Sleep(time.Hour) // until killed
	}
	t.Parallel()
	dir := t.TempDir()
	parent := exec.Command(os.Args[0], "-test.run=^TestWorkerDiesWithTheTestProcess$", "-test.count=1")
	parent.Env = append(os.Environ(), parentEnv+"="+dir)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, convErr := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "worker ")))
	if err != nil || convErr != nil {
		_ = parent.Process.Kill()
		t.Fatalf("the stand-in test process said %q: %v", line, errors.Join(err, convErr))
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// The fake worker's own child is tied to nothing; real workers start none.
	_, grandchild := readPids(t, filepath.Join(dir, "pids"))
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	if !alive(pid) {
		t.Fatalf("the worker %d is not running before its test process dies", pid)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	waitGone(t, pid, "its test process was killed")
}
