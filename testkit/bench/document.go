package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Document is one run's report, docs/benchmarks.md: the figures, issue 21's goals, the
// baselines, the scaling series, each miss with the top of its profile and its hand-written
// causes, and how the figures are taken.
type Document struct {
	Report *Report
	// Flags are the run's flags as the header states them.
	Flags string
	// MaxWait is batch.max_wait of the run's pipelines (the latency goal's base).
	MaxWait time.Duration
	// Failures are the phases that failed (a sink's error), reported as such.
	Failures []string
	// Top renders the top of a miss's profile (PprofTop in a run).
	Top TopFunc
}

// Kept block names that are not a miss's causes.
const (
	// KeptBeforeAfter is the hand-written account of past fixes and their measured gains.
	KeptBeforeAfter = "before-after"
	// keptCausesPrefix prefixes Check.Key in the name of a miss's causes.
	keptCausesPrefix = "causes/"
)

// causesPlaceholder is a new miss's causes block, for the lead to replace after the run.
const causesPlaceholder = "1. _(to be written by hand from the profile above)_\n2. …\n3. …"

// Write writes the document to w, placing the hand-written blocks of the earlier report kept.
func (d Document) Write(ctx context.Context, w io.Writer, kept *Kept) {
	r := d.Report
	fmt.Fprintf(w, "# Benchmarks\n\nMeasured %s on %s, with a %d-row, 7-column table (`make bench`, flags: %s).\n\n",
		r.Date.Format("2006-01-02 15:04 MST"), r.Machine, r.Rows, d.Flags)
	r.WriteTable(w)
	checks := r.Checks(d.MaxWait)
	if len(checks) > 0 {
		fmt.Fprint(w, "\n## Goals (issue 21)\n\nEvery goal of every sink that has goals (Couchbase has none), met or not.\n\n")
		WriteChecks(w, checks)
	}
	r.WriteBaselines(w)
	r.WriteScaling(w)
	if misses := Misses(checks); len(misses) > 0 {
		fmt.Fprint(w, "\n## Misses\n\nEach missed goal with the top of the profile of the worker that ran its phase (CPU: flat, then\ncumulative; memory: the heap at the highest RSS seen, inuse_space, then alloc_space since the\nworker started). Its causes are written by hand after the run, between the markers: `make bench`\nkeeps them.\n")
		for _, c := range misses {
			d.writeMiss(ctx, w, c, kept)
		}
	}
	for _, f := range d.Failures {
		fmt.Fprintf(w, "\nA phase failed during the run: %s\n", f)
	}
	fmt.Fprint(w, "\n"+MethodNotes())
	fmt.Fprintln(w)
	fmt.Fprint(w, kept.Block(KeptBeforeAfter, "## Before and after\n\n_(hand-written: each fix and its measured gain)_"))
	kept.WriteUnused(w, causesPlaceholder)
}

// writeMiss writes one missed goal: its figure, the top of its profile (or why there is none)
// and its causes block.
func (d Document) writeMiss(ctx context.Context, w io.Writer, c Check, kept *Kept) {
	fmt.Fprintf(w, "\n### %s: %s\n\nFigure: %s.\n\n", c.Sink, c.Text, c.Figure)
	switch {
	case c.Result == nil:
		fmt.Fprint(w, "No profile: the phase was not measured in this run.\n")
	default:
		res := c.Result
		what, path := "CPU profile", res.Profiles.CPU
		if c.Memory {
			what, path = fmt.Sprintf("heap profile at %d MiB RSS (peak %d MiB)", res.Profiles.HeapRSS>>20, res.PeakRSS>>20), res.Profiles.Heap
		}
		var top string
		var err error
		if d.Top == nil {
			err = fmt.Errorf("profiles were not rendered")
		} else {
			top, err = d.Top(ctx, res.Profiles, c.Memory)
		}
		if err != nil && c.Memory && res.Profiles.HeapErr != "" {
			err = fmt.Errorf("%w (%s)", err, res.Profiles.HeapErr)
		}
		if err != nil {
			fmt.Fprintf(w, "No profile of phase %q: %v.\n", res.Name, err)
			break
		}
		fmt.Fprintf(w, "Phase %q, %s `%s`:\n\n```text\n%s```\n", res.Name, what, path, strings.TrimRight(top, "\n")+"\n")
	}
	fmt.Fprint(w, "\nCauses, the top three (hand-written after the run):\n\n")
	fmt.Fprint(w, kept.Block(keptCausesPrefix+c.Key(), causesPlaceholder))
}

// RatioTo is a's throughput over b's, 0 when b has none.
func RatioTo(a, b Result) float64 {
	if b.RowsPerSec() <= 0 {
		return 0
	}
	return a.RowsPerSec() / b.RowsPerSec()
}

// WriteBaselines writes, per sink with a backfill and baselines, Sluice's backfill against
// COPY binary and against each baseline of that sink.
func (r *Report) WriteBaselines(w io.Writer) {
	var lines []string
	for _, sink := range r.Sinks {
		backfill := r.find(sink, KindBackfill)
		if backfill == nil {
			continue
		}
		for _, b := range r.Results {
			if b.Sink != sink || b.Kind != KindBaseline {
				continue
			}
			lines = append(lines, fmt.Sprintf("| %s | %.0f rows/s | %.2fx | %s | %.0f rows/s | %.2fx |", sink,
				backfill.RowsPerSec(), r.Ratio(*backfill), cell(b.Name), b.RowsPerSec(), RatioTo(*backfill, b)))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprint(w, "\n## Backfill against what a user would pick instead\n\nThe same rows loaded by hand, in the same run: Sluice's backfill over each (and over COPY\nbinary, the goal's ratio).\n\n")
	fmt.Fprintln(w, "| sink | Sluice backfill | ratio to COPY binary | baseline | baseline | Sluice / baseline |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// WriteScaling writes the --scaling series: per sink, the backfill at each snapshot_parallelism,
// with its ratio to COPY binary and its speed-up over parallelism 1.
func (r *Report) WriteScaling(w io.Writer) {
	var lines []string
	for _, sink := range r.Sinks {
		var one *Result
		for i := range r.Results {
			res := &r.Results[i]
			if res.Sink != sink || res.Kind != KindScaling {
				continue
			}
			if res.Parallelism == 1 {
				one = res
			}
			speedup := ""
			if one != nil {
				speedup = fmt.Sprintf("%.2fx", RatioTo(*res, *one))
			}
			lines = append(lines, fmt.Sprintf("| %s | %d | %s | %.0f | %.2fx | %s | %d MiB |", sink, res.Parallelism,
				res.Elapsed.Round(time.Millisecond), res.RowsPerSec(), r.Ratio(*res), speedup, res.PeakRSS>>20))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Backfill scaling with source.snapshot_parallelism\n\nThe backfill of the same %d rows from an empty sink, in a fresh worker, at each\nparallelism, on this machine's %s.\n\n", r.Rows, r.Machine)
	fmt.Fprintln(w, "| sink | snapshot_parallelism | elapsed | rows/s | ratio to COPY binary | over parallelism 1 | worker peak RSS |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
