package devstack

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestStopKillsTheWholeTree: a service that ignores its stop signal and whose children are
// session leaders of their own (as Postgres' backends and walsenders are) is killed with all of
// them once StopWait passes: no orphan survives to hold the service's shared memory or port.
func TestStopKillsTheWholeTree(t *testing.T) {
	t.Parallel()
	s := &Stack{Dir: t.TempDir(), StopWait: 500 * time.Millisecond}
	cmd := exec.Command("sh", "-c", `trap "" TERM INT; setsid sleep 300 & setsid sleep 300 & while :; do sleep 1; done`)
	if err := spawn(cmd, filepath.Join(s.Dir, "svc.log")); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	var tree []int
	deadline := time.Now().Add(10 * time.Second)
	for len(tree) < 2 && time.Now().Before(deadline) {
		tree = descendants(pid)
		time.Sleep(20 * time.Millisecond)
	}
	if len(tree) < 2 {
		t.Fatalf("the service's children did not start: %v", tree)
	}
	t.Cleanup(func() { killTree(pid, tree, time.Second) })

	if err := s.stopInfo(Info{Service: "svc", PID: pid}); err != nil {
		t.Fatal(err)
	}
	for _, p := range append([]int{pid}, tree...) {
		if alive(p) {
			t.Errorf("pid %d of the service's tree %v survived Stop", p, tree)
		}
	}
}
