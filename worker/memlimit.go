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

// batchesInMemory is how many batches of batch.max_bytes the heap is held to when --memory-limit
// is auto and neither GOMEMLIMIT nor a container limit gives one: the reader's buffer and its
// encoded copy, the batch being committed and the sink's encoding of it (or a backfill chunk and
// the one read ahead), with room for the runtime. 448 MiB with the default 64 MiB batches.
const batchesInMemory = 7

// minMemoryLimit is the least soft limit taken from batch.max_bytes: below it, small batches
// would only make the garbage collector run more often for nothing.
const minMemoryLimit = 256 << 20

// applyMemoryLimit sets the Go runtime's soft memory limit (debug.SetMemoryLimit) from the
// --memory-limit flag: "auto" (the default) leaves a GOMEMLIMIT from the environment alone,
// otherwise takes 75% of the container's cgroup memory limit when there is one, and otherwise
// seven batches of batchMaxBytes (at least 256 MiB); "off" sets none; a size such as 400MiB or
// 1GiB sets that. A soft limit makes the garbage collector work harder as the heap nears it
// instead of letting it double past it (the runtime's default), which keeps the worker's memory
// proportional to its batches; it never fails an allocation, and the collector's share of the
// CPU stays capped when the live heap needs more.
func applyMemoryLimit(flag string, batchMaxBytes int64, log *slog.Logger) error {
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
			soft := autoLimitFromBatches(batchMaxBytes)
			debug.SetMemoryLimit(soft)
			log.Info("memory limit from batch.max_bytes", "batch_max_bytes", batchMaxBytes, "soft_limit_bytes", soft)
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

// autoLimitFromBatches is the soft limit auto takes outside a container: batchesInMemory batches
// of batchMaxBytes, at least minMemoryLimit.
func autoLimitFromBatches(batchMaxBytes int64) int64 {
	return max(batchesInMemory*batchMaxBytes, minMemoryLimit)
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
