package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	httppprof "net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

func TestProfileDir(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 4, 10, 0, 0, time.UTC)
	cases := []struct {
		name, flag, stack, repo string
		want, wantErr           string
	}{
		{name: "off", flag: "off", stack: "/work/stack/bench-profiles", repo: "/work/main"},
		{name: "empty is off", flag: "", stack: "/work/stack/bench-profiles", repo: "/work/main"},
		{name: "auto under the stack", flag: "auto", stack: "/work/stack/bench-profiles", repo: "/work/main", want: "/work/stack/bench-profiles/20261205-041000"},
		{name: "auto with the stack in the repository goes to tmp", flag: "auto", stack: "/work/main/.stack/bench-profiles", repo: "/work/main",
			want: "/tmp/sluice-bench-profiles/20261205-041000"},
		{name: "a sibling that shares a prefix is not inside", flag: "auto", stack: "/work/main-stack/bench-profiles", repo: "/work/main",
			want: "/work/main-stack/bench-profiles/20261205-041000"},
		{name: "a directory outside", flag: "/var/prof", stack: "/work/stack/bench-profiles", repo: "/work/main", want: "/var/prof"},
		{name: "a directory in the repository", flag: "/work/main/profiles", stack: "/work/stack/bench-profiles", repo: "/work/main",
			wantErr: "inside the repository"},
		{name: "the repository itself", flag: "/work/main", stack: "/work/stack/bench-profiles", repo: "/work/main", wantErr: "inside the repository"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ProfileDir(tc.flag, tc.stack, tc.repo, "/tmp", now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ProfileDir = %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ProfileDir = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestPprofTop renders real profiles of this test process with go tool pprof.
func TestPprofTop(t *testing.T) {
	dir := t.TempDir()
	cpu, heap := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "heap.pprof")
	f, err := os.Create(cpu)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	var sink []byte
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		sink = append(sink[:0], make([]byte, 1<<16)...)
	}
	pprof.StopCPUProfile()
	f.Close()
	runtime.GC()
	h, err := os.Create(heap)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.Lookup("heap").WriteTo(h, 0); err != nil {
		t.Fatal(err)
	}
	h.Close()
	_ = sink

	cases := []struct {
		name   string
		p      Profiles
		memory bool
		want   []string
		err    string
	}{
		{name: "CPU: flat then cumulative", p: Profiles{CPU: cpu}, want: []string{"$ go tool pprof -top\n", "$ go tool pprof -top -cum\n", "flat%", "cum%"}},
		{name: "memory: inuse then alloc", p: Profiles{Heap: heap}, memory: true,
			want: []string{"-sample_index=inuse_space", "-sample_index=alloc_space", "flat%"}},
		{name: "not profiled", p: Profiles{}, err: "not profiled"},
		{name: "a missing file", p: Profiles{CPU: filepath.Join(dir, "nope")}, err: "profile missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := PprofTop(15)(context.Background(), tc.p, tc.memory)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "File: ") {
				t.Errorf("output keeps pprof's File line:\n%s", out)
			}
		})
	}
}

// TestFetchHeap fetches this test process's heap profile over net/http/pprof, as the watcher
// does from a worker started with --pprof.
func TestFetchHeap(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", httppprof.Index)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()
	heap := filepath.Join(dir, "w-1.heap.pprof")
	if err := fetchHeap(context.Background(), srv.Client(), srv.URL+"/debug/pprof/heap", heap, memStatsPath(heap)); err != nil {
		t.Fatal(err)
	}
	stats, err := os.ReadFile(filepath.Join(dir, "w-1.heap.memstats.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range memStatsFields() {
		if !strings.Contains(string(stats), f) {
			t.Errorf("MemStats lack %q:\n%s", f, stats)
		}
	}
	out, err := PprofTop(5)(context.Background(), Profiles{Heap: heap}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "runtime.MemStats when the profile was taken:\n# Sys = ") || !strings.Contains(out, "inuse_space") {
		t.Errorf("the memory top lacks the MemStats or the profile:\n%s", out)
	}
	if err := fetchHeap(context.Background(), srv.Client(), srv.URL+"/debug/pprof/nope", heap, memStatsPath(heap)); err == nil {
		t.Error("fetching a profile that does not exist succeeded")
	}
}
