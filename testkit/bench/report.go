package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// Kinds of Sluice results, which the goals are checked against.
const (
	KindBackfill    = "backfill"
	KindStreamBulk  = "stream-bulk"
	KindStreamSmall = "stream-small"
	KindRestart     = "restart"
	KindLatency     = "latency"
	// KindMemoryBackfill and KindMemoryTx are the memory cases: a large backfill and one large
	// transaction, whose figure is the worker's peak RSS.
	KindMemoryBackfill = "memory-backfill"
	KindMemoryTx       = "memory-tx"
	// KindBaseline is a bulk load a user would write by hand instead of Sluice, per sink.
	KindBaseline = "baseline"
	// KindScaling is a backfill at one snapshot_parallelism of the --scaling series.
	KindScaling = "scaling"
)

// Result is one measured figure.
type Result struct {
	Name    string
	Rows    int64
	Bytes   int64
	Elapsed time.Duration
	Note    string
	// Limit names the result this one is a ratio to (empty: none).
	Limit string
	// Sink and Kind identify Sluice's figures (empty for the limits).
	Sink, Kind string
	// PeakRSS is the worker's peak resident set size in bytes during the measurement (0: none).
	PeakRSS int64
	// Latency is set for the fixed-rate latency run.
	Latency *LatencyResult
	// Overhead is the fixed cost inside Elapsed (the pipeline's restart), shown separately.
	Overhead time.Duration
	// Parallelism is the backfill's source.snapshot_parallelism (0: the worker's default).
	Parallelism int
	// Profiles are the worker's profiles of the phase (empty when not profiled).
	Profiles Profiles
}

// Profiles are the profiles of one worker process, which ran one phase.
type Profiles struct {
	// CPU is the worker's CPU profile of its whole run.
	CPU string
	// Heap is the heap profile fetched at the highest RSS seen while the phase ran, HeapRSS.
	Heap    string
	HeapRSS int64
	// HeapErr says why there is no heap profile, when there is none.
	HeapErr string
	// Binary is the worker binary, for pprof's symbols.
	Binary string
}

// NetRowsPerSec is the throughput without Overhead, 0 when there is none.
func (r Result) NetRowsPerSec() float64 {
	if r.Overhead <= 0 || r.Elapsed <= r.Overhead {
		return 0
	}
	return float64(r.Rows) / (r.Elapsed - r.Overhead).Seconds()
}

// RowsPerSec is the throughput in rows per second.
func (r Result) RowsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Rows) / r.Elapsed.Seconds()
}

// MBPerSec is the throughput in megabytes (10^6 bytes) per second, when bytes were counted.
func (r Result) MBPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds()
}

// Report is one benchmark run: the machine, the date and every figure.
type Report struct {
	Date    time.Time
	Machine string
	// Rows, Bulk, SmallTx and MemoryRows are the workloads' sizes, which the goals state.
	Rows, Bulk, SmallTx, MemoryRows int
	// Sinks are the sinks measured (--sinks).
	Sinks   []string
	Results []Result
}

// Machine describes the host in one line: cores, memory and Go version.
func Machine() string {
	return fmt.Sprintf("%s/%s, %d cores, %s, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), memTotal(), runtime.Version())
}

// Ratio is r's throughput over its limit's, 0 when it has none.
func (r Report) Ratio(res Result) float64 {
	for _, lim := range r.Results {
		if lim.Name == res.Limit && lim.RowsPerSec() > 0 {
			return res.RowsPerSec() / lim.RowsPerSec()
		}
	}
	return 0
}

// NetRatio is r's throughput without its overhead over its limit's, 0 when either is unknown.
func (r Report) NetRatio(res Result) float64 {
	for _, lim := range r.Results {
		if lim.Name == res.Limit && lim.RowsPerSec() > 0 {
			return res.NetRowsPerSec() / lim.RowsPerSec()
		}
	}
	return 0
}

// WriteTable prints the figures as one Markdown table.
func (r Report) WriteTable(w io.Writer) {
	fmt.Fprintln(w, "| measurement | rows | elapsed | rows/s | MB/s | ratio to limit | worker peak RSS | note |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---|")
	for _, res := range r.Results {
		ratio := ""
		if x := r.Ratio(res); x > 0 {
			ratio = fmt.Sprintf("%.2fx", x)
		}
		mb, rss := "", ""
		if res.Bytes > 0 {
			mb = fmt.Sprintf("%.1f", res.MBPerSec())
		}
		if x := r.NetRatio(res); x > 0 {
			ratio += fmt.Sprintf(" (%.2fx net)", x)
		}
		if res.PeakRSS > 0 {
			rss = fmt.Sprintf("%d MiB", res.PeakRSS>>20)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s | %s | %s | %s |\n", cell(res.Name), res.Rows,
			res.Elapsed.Round(time.Millisecond), res.RowsPerSec(), mb, ratio, rss, cell(res.Note))
	}
}

// cell is text made safe for a Markdown table cell: a "|" would end the cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
