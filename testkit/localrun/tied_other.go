//go:build !linux

package localrun

import (
	"errors"
	"syscall"
)

// tiedProcAttr makes a child the leader of a new process group. Outside Linux there is no
// Pdeathsig: a child outlives a test binary that dies without running its cleanups.
func tiedProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// waitExitNoReap cannot wait without reaping here; the child's group is not killed at its exit.
func waitExitNoReap(int) error { return errors.ErrUnsupported }
