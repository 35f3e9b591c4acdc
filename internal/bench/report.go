package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// Report is one benchmark run: the machine, the date and every figure.
type Report struct {
	Date    time.Time
	Machine string
	Rows    int
	Results []Result
}

// Machine describes the host in one line: cores, memory and Go version.
func Machine() string {
	return fmt.Sprintf("%s/%s, %d cores, %s, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), memTotal(), runtime.Version())
}

// WriteTable prints the figures as a Markdown table; ratios are to the limit named by ratioTo.
func (r Report) WriteTable(w io.Writer, ratioTo map[string]string) {
	byName := map[string]Result{}
	for _, res := range r.Results {
		byName[res.Name] = res
	}
	fmt.Fprintln(w, "| measurement | rows | elapsed | rows/s | MB/s | ratio to limit | note |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|")
	for _, res := range r.Results {
		ratio := ""
		if lim, ok := byName[ratioTo[res.Name]]; ok && lim.RowsPerSec() > 0 {
			ratio = fmt.Sprintf("%.2fx", res.RowsPerSec()/lim.RowsPerSec())
		}
		mb := ""
		if res.Bytes > 0 {
			mb = fmt.Sprintf("%.1f", res.MBPerSec())
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s | %s | %s |\n", res.Name, res.Rows,
			res.Elapsed.Round(time.Millisecond), res.RowsPerSec(), mb, ratio, strings.ReplaceAll(res.Note, "|", "/"))
	}
}
