package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupMemoryMax is where cgroup v2 publishes the container's memory limit.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// memoryLimitShare is the part of a container's memory limit the Go heap is held to when
// --memory-limit is auto: the rest is for goroutine stacks, the driver's C-free buffers that the
// runtime does not count, and the page cache of staged files.
const memoryLimitShare = 0.75

// applyMemoryLimit sets the Go runtime's soft memory limit (debug.SetMemoryLimit) from the
// --memory-limit flag: "auto" (the default) leaves a GOMEMLIMIT from the environment alone and
// otherwise takes 75% of the container's cgroup memory limit when there is one; "off" sets none;
// a size such as 400MiB or 1GiB sets that. A soft limit makes the garbage collector work harder
// as the heap nears it instead of letting it double past it, which keeps large batches inside a
// container's memory; it never fails an allocation.
func applyMemoryLimit(flag string, log *slog.Logger) error {
	switch strings.ToLower(strings.TrimSpace(flag)) {
	case "off", "0":
		return nil
	case "", "auto":
		if v := os.Getenv("GOMEMLIMIT"); v != "" {
			log.Info("memory limit from GOMEMLIMIT", "limit", v)
			return nil
		}
		limit, ok := cgroupLimit(cgroupMemoryMax)
		if !ok {
			return nil
		}
		soft := int64(float64(limit) * memoryLimitShare)
		debug.SetMemoryLimit(soft)
		log.Info("memory limit from the container", "cgroup_limit_bytes", limit, "soft_limit_bytes", soft)
		return nil
	}
	n, err := parseSize(flag)
	if err != nil {
		return fmt.Errorf("--memory-limit %q: %w; write a size such as 400MiB or 2GiB, auto or off", flag, err)
	}
	debug.SetMemoryLimit(n)
	log.Info("memory limit", "soft_limit_bytes", n)
	return nil
}

// cgroupLimit reads a cgroup v2 memory.max file: a number of bytes, or "max" for none.
func cgroupLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// parseSize parses a byte size: a number with an optional B, KiB, MiB, GiB or TiB suffix.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("not a positive size")
	}
	return n * mult, nil
}
