package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeTop renders a profile as one line naming it, and fails like PprofTop on a missing path.
func fakeTop(_ context.Context, p Profiles, memory bool) (string, error) {
	path, kind := p.CPU, "cpu"
	if memory {
		path, kind = p.Heap, "heap"
	}
	if path == "" {
		return "", errors.New("the phase was not profiled")
	}
	return "TOP " + kind + " " + path + "\n", nil
}

// profiled is r with the profiles of worker name.
func profiled(r Result, name string) Result {
	r.Profiles = Profiles{CPU: name + ".cpu.pprof", Heap: name + ".heap.pprof", HeapRSS: r.PeakRSS}
	return r
}

// section is the text of doc from the heading that starts with prefix to the next heading of
// level 2 or 3 ("" when there is no such heading).
func section(doc, prefix string) string {
	i := strings.Index(doc, "\n"+prefix)
	if i < 0 {
		return ""
	}
	rest := doc[i+1:]
	end := len(rest)
	for _, h := range []string{"\n## ", "\n### "} {
		if j := strings.Index(rest[1:], h); j >= 0 && j+1 < end {
			end = j + 1
		}
	}
	return rest[:end]
}

func write(t *testing.T, r *Report, old string) string {
	t.Helper()
	kept, err := ParseKept(old)
	if err != nil {
		t.Fatalf("the earlier report's kept blocks: %v", err)
	}
	var b strings.Builder
	Document{Report: r, Flags: "--test", MaxWait: time.Second, Top: fakeTop}.Write(context.Background(), &b, kept)
	return b.String()
}

func TestMissesRendering(t *testing.T) {
	t.Parallel()
	results := allMet("iceberg")
	results = replace(results, profiled(at("iceberg", KindBackfill, "copy", 0.5, 300*mib), "w1"))
	results = replace(results, profiled(at("iceberg", KindMemoryTx, "", 1, 450*mib), "w7"))
	results = replace(results, at("iceberg", KindStreamBulk, "recv bulk", 0.5, 300*mib)) // a miss without profiles
	results = append(results, allMet("clickhouse")...)
	results = without(results, KindLatency) // not measured for both sinks
	r := &Report{Rows: 100_000, Sinks: []string{"iceberg", "clickhouse"}, Results: append(limits(), results...)}
	doc := write(t, r, "")

	cases := []struct {
		name    string
		heading string // the miss's subsection
		want    []string
		absent  bool // no such subsection: the goal was met
	}{
		{name: "a ratio miss shows its phase's CPU profile", heading: "### iceberg: backfill of",
			want: []string{"Figure: 0.50x", "CPU profile `w1.cpu.pprof`", "TOP cpu w1.cpu.pprof", "<!-- keep: causes/iceberg/backfill -->"}},
		{name: "the memory miss shows the heap profile of the worst phase", heading: "### iceberg: worker peak RSS",
			want: []string{"450 MiB", "heap profile at 450 MiB RSS", "TOP heap w7.heap.pprof", "<!-- keep: causes/iceberg/peak-rss -->"}},
		{name: "a miss whose phase has no profile says so", heading: "### iceberg: stream, one",
			want: []string{"No profile of phase", "the phase was not profiled", "<!-- keep: causes/iceberg/stream-bulk -->"}},
		{name: "a goal not measured is a miss without a profile", heading: "### clickhouse: p99 latency",
			want: []string{"not measured", "No profile: the phase was not measured", "<!-- keep: causes/clickhouse/latency -->"}},
		{name: "a met goal has no miss", heading: "### clickhouse: backfill of", absent: true},
		{name: "a met memory goal has no miss", heading: "### clickhouse: worker peak RSS", absent: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := section(doc, tc.heading)
			if tc.absent {
				if s != "" {
					t.Fatalf("a met goal has a miss section:\n%s", s)
				}
				return
			}
			if s == "" {
				t.Fatalf("no section %q in:\n%s", tc.heading, doc)
			}
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("section %q lacks %q:\n%s", tc.heading, w, s)
				}
			}
		})
	}
	goals := section(doc, "## Goals (issue 21)")
	if n := strings.Count(goals, "\n| iceberg |") + strings.Count(goals, "\n| clickhouse |"); n != 12 {
		t.Errorf("the goals table has %d rows, want 12 (6 goals x 2 sinks):\n%s", n, goals)
	}
}

// TestHandWrittenCausesSurvive runs the writer three times, as three `make bench` runs with the
// lead's edits in between.
func TestHandWrittenCausesSurvive(t *testing.T) {
	t.Parallel()
	missing := replace(allMet("iceberg"), profiled(at("iceberg", KindBackfill, "copy", 0.5, 300*mib), "w1"))
	report := func(results []Result) *Report {
		return &Report{Rows: 100_000, Sinks: []string{"iceberg"}, Results: append(limits(), results...)}
	}
	first := write(t, report(missing), "")
	if !strings.Contains(first, causesPlaceholder) {
		t.Fatalf("the first run has no placeholder for the causes:\n%s", first)
	}
	const causes = "1. Parquet encoding: 40% of CPU.\n2. zstd.\n3. One chunk in flight."
	const account = "## Before and after\n\nFix A: 2x faster."
	edited := strings.Replace(first, causesPlaceholder, causes, 1)
	edited = strings.Replace(edited, "## Before and after\n\n_(hand-written: each fix and its measured gain)_", account, 1)
	if edited == first {
		t.Fatal("the test's edit did not apply")
	}

	cases := []struct {
		name    string
		results []Result
		want    []string
		section string // where the causes must be
	}{
		{name: "the goal still missed: the causes stay in their miss", results: missing,
			want: []string{causes, account}, section: "### iceberg: backfill of"},
		{name: "the goal met now: the causes move to the kept blocks", results: allMet("iceberg"),
			want: []string{causes, account}, section: "## Kept from earlier runs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			second := write(t, report(tc.results), edited)
			third := write(t, report(tc.results), second)
			for run, doc := range map[string]string{"second": second, "third": third} {
				for _, w := range tc.want {
					if !strings.Contains(doc, w) {
						t.Errorf("%s run lost %q:\n%s", run, w, doc)
					}
				}
				if s := section(doc, tc.section); !strings.Contains(s, causes) {
					t.Errorf("%s run: the causes are not under %q:\n%s", run, tc.section, doc)
				}
				if strings.Contains(doc, causesPlaceholder) {
					t.Errorf("%s run wrote a placeholder beside the hand-written causes", run)
				}
			}
			if second != third {
				t.Errorf("a run over its own output changed it:\n--- second\n%s\n--- third\n%s", second, third)
			}
		})
	}
}

// TestDocsHaveTheMethod: docs/benchmarks.md states the method the code follows (a run writes
// it; a change of method.md without a run must update the docs too).
func TestDocsHaveTheMethod(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), strings.TrimRight(MethodNotes(), "\n")) {
		t.Fatal("docs/benchmarks.md's method section differs from testkit/bench/method.md: copy it over, or run make bench")
	}
	if _, err := ParseKept(string(b)); err != nil {
		t.Fatalf("docs/benchmarks.md's hand-written blocks cannot be read, so make bench would not write it: %v", err)
	}
}
