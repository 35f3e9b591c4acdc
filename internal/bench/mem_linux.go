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
