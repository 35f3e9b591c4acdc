package main

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	rpprof "runtime/pprof"
)

// cpuProfileEnv names the environment variable that sets --cpu-profile's default, so a harness
// that starts workers with an environment (the benchmark) can profile them.
const cpuProfileEnv = "SLUICE_CPU_PROFILE"

// memProfileEnv names the environment variable that sets --mem-profile's default.
const memProfileEnv = "SLUICE_MEM_PROFILE"

// startCPUProfile writes a CPU profile of the whole process to path until the returned stop is
// called (at shutdown). An empty path profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating --cpu-profile %s: %w", path, err)
	}
	if err := rpprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	return func() {
		rpprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// writeMemProfile writes the heap profile (allocations since start, and what is in use) to path
// at shutdown. An empty path writes nothing.
func writeMemProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating --mem-profile %s: %w", path, err)
	}
	defer f.Close()
	if err := rpprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		return fmt.Errorf("writing the memory profile: %w", err)
	}
	return nil
}

// handlePprof serves net/http/pprof's handlers under /debug/pprof/ on mux.
func handlePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
