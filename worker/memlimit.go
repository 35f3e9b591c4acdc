package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/internal/logkey"
)

// cgroupMemoryMax is where cgroup v2 publishes the container's memory limit.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// memoryLimitShare is the part of a container's memory limit the Go heap is held to when
// --memory-limit is auto: the rest is for goroutine stacks, the driver's C-free buffers that the
// runtime does not count, and the page cache of staged files.
const memoryLimitShare = 0.75

// batchesInMemory is how many batches of batch.max_bytes the heap is held to when --memory-limit
// is auto and neither GOMEMLIMIT nor a container limit gives one: the batch the reader fills and
// the one it encodes, and the group being committed with the sink's encoding of it (or a
// backfill chunk and the one read ahead), with room for the runtime. 320 MiB with the default
// 64 MiB batches, which keeps the worker's resident set (the heap, the runtime's own memory and
// the binary's pages) under 400 MiB in the memory cases of docs/benchmarks.md.
const batchesInMemory = 5

// minMemoryLimit is the least soft limit taken from batch.max_bytes: below it, small batches
// would only make the garbage collector run more often for nothing.
const minMemoryLimit = 256 << 20

// memoryLimit is the soft limit --memory-limit asks for, and where it came from.
type memoryLimit struct {
	bytes  int64  // 0: set none (off, or GOMEMLIMIT left to the runtime)
	source string // off, GOMEMLIMIT, container, batch.max_bytes or flag
}

// applyMemoryLimit sets the Go runtime's soft memory limit (debug.SetMemoryLimit) from the
// --memory-limit flag (see deriveMemoryLimit). A soft limit makes the garbage collector work
// harder as the heap nears it instead of letting it double past it (the runtime's default),
// which keeps the worker's memory proportional to its batches; it never fails an allocation,
// and the collector's share of the CPU stays capped when the live heap needs more.
func applyMemoryLimit(flag string, batchMaxBytes int64, log *slog.Logger) error {
	lim, err := deriveMemoryLimit(flag, os.Getenv("GOMEMLIMIT"), cgroupMemoryMax, batchMaxBytes)
	if err != nil {
		return err
	}
	switch lim.source {
	case "off":
		return nil
	case "GOMEMLIMIT":
		log.Info("memory limit from GOMEMLIMIT", logkey.Limit, os.Getenv("GOMEMLIMIT"))
		return nil
	}
	debug.SetMemoryLimit(lim.bytes)
	log.Info("memory limit", logkey.From, lim.source, logkey.BatchMaxBytes, batchMaxBytes, logkey.SoftLimitBytes, lim.bytes)
	return nil
}

// deriveMemoryLimit is the soft limit of --memory-limit flag: "auto" (the default) leaves a
// GOMEMLIMIT (gomemlimit, from the environment) alone, otherwise takes 75% of the cgroup memory
// limit read from cgroupPath when there is one, and otherwise batchesInMemory batches of
// batchMaxBytes (at least 256 MiB); "off" sets none; a size such as 400MiB or 1GiB sets that.
func deriveMemoryLimit(flag, gomemlimit, cgroupPath string, batchMaxBytes int64) (memoryLimit, error) {
	switch strings.ToLower(strings.TrimSpace(flag)) {
	case "off", "0":
		return memoryLimit{source: "off"}, nil
	case "", "auto":
		if gomemlimit != "" {
			return memoryLimit{source: "GOMEMLIMIT"}, nil
		}
		if limit, ok := cgroupLimit(cgroupPath); ok {
			return memoryLimit{bytes: int64(float64(limit) * memoryLimitShare), source: "container"}, nil
		}
		return memoryLimit{bytes: autoLimitFromBatches(batchMaxBytes), source: "batch.max_bytes"}, nil
	}
	n, err := parseMemoryLimit(flag)
	if err != nil {
		return memoryLimit{}, fmt.Errorf("--memory-limit %q: %w; write a size such as 400MiB or 2GiB, auto or off", flag, err)
	}
	return memoryLimit{bytes: n, source: "flag"}, nil
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
