//go:build faults && !unix

package faults

import "os"

// killSelf kills this process (TerminateProcess outside Unix) and blocks until it is gone.
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	select {}
}
