package localrun

import (
	"syscall"
	"unsafe"
)

// tiedProcAttr makes a child the leader of a new process group that the kernel SIGKILLs when
// the thread that started it exits (see startTied).
func tiedProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitExitNoReap blocks until the child pid has exited and leaves it unreaped (waitid with
// WNOWAIT), so its pid and process group id stay reserved until cmd.Wait reaps it.
func waitExitNoReap(pid int) error {
	const pPID, wNOWAIT = 1, 0x1000000 // P_PID, WNOWAIT of <sys/wait.h>
	var info [128]byte                 // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wNOWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}
