package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/sluicecdc/sluice/config"
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
	n, err := parseMemoryLimit(flag)
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

// parseMemoryLimit reads a --memory-limit size in the syntax of the config's sizes
// (config.ParseByteSize: 400MiB, 1.5GiB, 512MB, a number of bytes); it must be positive.
func parseMemoryLimit(s string) (int64, error) {
	n, err := config.ParseByteSize(s)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("%q is not a positive size", s)
	}
	return int64(n), nil
}
