//go:build faults && unix

package faults

import (
	"os"
	"syscall"
)

// killSelf sends SIGKILL to this process, as a crash would (no deferred calls, no flush, no
// exit status of its own choosing), and blocks until the kernel takes the process away.
func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
