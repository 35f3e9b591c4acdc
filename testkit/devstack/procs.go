package devstack

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// descendants returns the processes below pid (children, their children, ...), read from
// /proc. Postgres makes each of its children a session leader of its own (setsid), so signalling
// the postmaster's process group does not reach them: they are found by parent instead, before the
// postmaster dies and they are re-parented.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) S ppid ...": the fields after the parenthesized command name.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// killTree sends SIGKILL to the service's process group and to every process of its tree (taken
// before the kill), then waits up to wait for all of them to be gone. It returns the pids still
// alive after that.
func killTree(pid int, tree []int, wait time.Duration) []int {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, p := range tree {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	all := append([]int{pid}, tree...)
	deadline := time.Now().Add(wait)
	for {
		var left []int
		for _, p := range all {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}
