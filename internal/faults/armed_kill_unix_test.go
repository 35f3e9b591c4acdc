//go:build faults && unix

package faults

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// childEnv marks the re-executed test binary of TestHitKillsTheProcess.
const childEnv = "SLUICE_FAULTS_TEST_CHILD"

// TestHitKillsTheProcess runs this test binary again as a child whose second pass of a point
// is armed, and checks the child died of SIGKILL at that pass: a crash, not an exit.
func TestHitKillsTheProcess(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		p, err := New("commit.before-write:kill@2:public.items", nil)
		if err != nil {
			os.Exit(3)
		}
		p.Hit(CommitBeforeWrite, refOf("public.items"))
		os.Stdout.WriteString("first pass survived\n")
		p.Hit(CommitBeforeWrite, refOf("public.items"))
		os.Stdout.WriteString("second pass survived\n")
		os.Exit(0)
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHitKillsTheProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child did not fail: %v\n%s", err, out)
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want death by SIGKILL\n%s", exit, out)
	}
	if got := string(out); !strings.Contains(got, "first pass survived") || strings.Contains(got, "second pass survived") {
		t.Fatalf("child output %q: want it to survive the first pass and die at the second", got)
	}
}
