package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sluicecdc/sluice/testkit/localrun"
)

// ProfileDirAuto asks ProfileDir for a fresh directory outside the repository.
const ProfileDirAuto = "auto"

// ProfileDir resolves --profile-dir: "" or "off" profiles nothing; "auto" is a fresh directory
// named after now under base (a directory of the stack), or under tmp when base lies in the
// repository at repoRoot; any other path is used as given, unless it lies in the repository
// (profiles are large and never committed).
func ProfileDir(flag, base, repoRoot, tmp string, now time.Time) (string, error) {
	switch flag {
	case "", "off":
		return "", nil
	case ProfileDirAuto:
		if within(repoRoot, base) {
			base = filepath.Join(tmp, "sluice-bench-profiles")
		}
		return filepath.Join(base, now.UTC().Format("20060102-150405")), nil
	}
	dir, err := filepath.Abs(flag)
	if err != nil {
		return "", fmt.Errorf("--profile-dir %s: %w", flag, err)
	}
	if within(repoRoot, dir) {
		return "", fmt.Errorf("--profile-dir %s is inside the repository %s: profiles are never committed; use auto or a directory outside it", flag, repoRoot)
	}
	return dir, nil
}

// within tells whether path is dir or below it.
func within(dir, path string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// heapWatcher fetches a worker's heap profile (/debug/pprof/heap, served with --pprof) each time
// its RSS has grown by 5% (at least 8 MiB) over the RSS of the last fetch, keeping only the last:
// the profile taken nearest the peak.
type heapWatcher struct {
	stop context.CancelFunc
	done chan struct{}

	mu  sync.Mutex
	rss int64 // the worker's RSS when the kept profile was fetched
	err error // the last fetch's error, when no fetch succeeded
}

// watchHeap starts watching worker w, writing to path, every interval.
func watchHeap(w *localrun.Worker, path string, interval time.Duration) *heapWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	h := &heapWatcher{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		addr, err := w.MetricsAddr(ctx, time.Minute)
		if err != nil {
			h.fail(fmt.Errorf("finding the worker's --metrics-addr: %w", err))
			return
		}
		client := &http.Client{Timeout: 20 * time.Second}
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			rss := CurrentRSS(w.PID())
			h.mu.Lock()
			taken := h.rss
			h.mu.Unlock()
			if rss > 0 && rss >= taken+max(8<<20, taken/20) {
				if err := fetchHeap(ctx, client, "http://"+addr+"/debug/pprof/heap", path, memStatsPath(path)); err != nil {
					if ctx.Err() != nil {
						return
					}
					h.fail(err)
				} else {
					h.mu.Lock()
					h.rss, h.err = rss, nil
					h.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-w.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

func (h *heapWatcher) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rss == 0 {
		h.err = err
	}
}

// Stop ends the watch and returns the RSS of the kept profile (0 and why when there is none).
func (h *heapWatcher) Stop() (int64, error) {
	h.stop()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rss, h.err
}

// fetchHeap writes the heap profile at url to path, and the runtime's MemStats of the same moment
// (from the text form of the profile) to statsPath, each through a temporary file so that a
// failed fetch leaves the previous ones.
func fetchHeap(ctx context.Context, client *http.Client, url, path, statsPath string) error {
	body, err := get(ctx, client, url)
	if err != nil {
		return err
	}
	text, err := get(ctx, client, url+"?debug=1")
	if err != nil {
		return err
	}
	if err := writeFile(path, body); err != nil {
		return err
	}
	return writeFile(statsPath, memStats(text))
}

func get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	return b, nil
}

func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	return os.Rename(tmp, path)
}

// memStatsPath is where the MemStats of the heap profile at heap go.
func memStatsPath(heap string) string { return strings.TrimSuffix(heap, ".pprof") + ".memstats.txt" }

// memStatsFields are the MemStats lines a memory miss shows: where the RSS goes besides the live
// heap (idle spans not yet returned, stacks, the GC's target).
func memStatsFields() []string {
	return []string{"# Sys = ", "# HeapAlloc = ", "# HeapInuse = ", "# HeapIdle = ", "# HeapReleased = ",
		"# Stack = ", "# NextGC = ", "# NumGC = "}
}

// memStats picks memStatsFields out of a heap profile's text form (debug=1).
func memStats(text []byte) []byte {
	var b strings.Builder
	fields := memStatsFields()
	for line := range strings.SplitSeq(string(text), "\n") {
		for _, f := range fields {
			if strings.HasPrefix(line, f) {
				b.WriteString(line + "\n")
			}
		}
	}
	return []byte(b.String())
}

// TopFunc renders the top of a phase's profile: the CPU profile, or the heap profile when memory.
type TopFunc func(ctx context.Context, p Profiles, memory bool) (string, error)

// PprofTop is the TopFunc of `go tool pprof -top`, nodes lines each: flat and cumulative for
// CPU; inuse_space (at the peak) and alloc_space (since the worker started) for memory.
func PprofTop(nodes int) TopFunc {
	return func(ctx context.Context, p Profiles, memory bool) (string, error) {
		path, views := p.CPU, [][]string{{"-top"}, {"-top", "-cum"}}
		if memory {
			path, views = p.Heap, [][]string{{"-top", "-sample_index=inuse_space"}, {"-top", "-sample_index=alloc_space"}}
		}
		if path == "" {
			return "", fmt.Errorf("the phase was not profiled")
		}
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("profile missing: %w", err)
		}
		var b strings.Builder
		if memory {
			if stats, err := os.ReadFile(memStatsPath(path)); err == nil && len(stats) > 0 {
				b.WriteString("runtime.MemStats when the profile was taken:\n")
				b.Write(stats)
				b.WriteString("\n")
			}
		}
		for i, view := range views {
			args := append([]string{"tool", "pprof", fmt.Sprintf("-nodecount=%d", nodes)}, view...)
			if p.Binary != "" {
				args = append(args, p.Binary)
			}
			out, err := exec.CommandContext(ctx, "go", append(args, path)...).CombinedOutput()
			if err != nil {
				return "", fmt.Errorf("go tool pprof %s %s: %w: %s", strings.Join(view, " "), path, err, out)
			}
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString(trimPprof(string(out), strings.Join(view, " ")))
		}
		return b.String(), nil
	}
}

// trimPprof drops pprof's file and build-id lines and titles the listing with its view.
func trimPprof(out, view string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ go tool pprof %s\n", view)
	for line := range strings.SplitSeq(strings.TrimRight(out, "\n"), "\n") {
		if strings.HasPrefix(line, "File: ") || strings.HasPrefix(line, "Build ID: ") {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
