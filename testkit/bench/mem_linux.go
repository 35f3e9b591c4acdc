package bench

import (
	"fmt"
	"os"
	"strings"
)

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "memory unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &kb); err == nil {
				return fmt.Sprintf("%.0f GiB", float64(kb)/1024/1024)
			}
		}
	}
	return "memory unknown"
}

// PeakRSS is the peak resident set size (VmHWM) of process pid in bytes, 0 when unknown.
func PeakRSS(pid int) int64 { return procStatus(pid, "VmHWM:") }

// CurrentRSS is the resident set size (VmRSS) of process pid in bytes, 0 when unknown.
func CurrentRSS(pid int) int64 { return procStatus(pid, "VmRSS:") }

// procStatus reads one kB field of /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimPrefix(line, field), "%d", &kb); err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
