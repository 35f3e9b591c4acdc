package workload

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// DiffKind classifies a difference between the source and a sink.
type DiffKind string

// The kinds of difference.
const (
	Missing    DiffKind = "missing"    // in the source, not in the sink
	Extra      DiffKind = "extra"      // in the sink, not in the source (deleted there, or never there)
	Stale      DiffKind = "stale"      // in both, with different values
	Duplicated DiffKind = "duplicated" // visible more than once in the sink
)

// Diff is one difference of one key.
type Diff struct {
	Kind   DiffKind
	Key    string
	Column string // the first differing column (stale only)
	Source string // the source's value of Column (stale) or row (missing)
	Sink   string // the sink's value of Column (stale) or row (extra, duplicated)
}

// String prints the difference.
func (d Diff) String() string {
	switch d.Kind {
	case Stale:
		return fmt.Sprintf("key %s stale: %s is %.200q in the sink, %.200q in the source", d.Key, d.Column, d.Sink, d.Source)
	case Missing:
		return fmt.Sprintf("key %s missing in the sink (source %.300s)", d.Key, d.Source)
	case Extra:
		return fmt.Sprintf("key %s extra in the sink (not in the source): %.300s", d.Key, d.Sink)
	}
	return fmt.Sprintf("key %s visible more than once in the sink: %.300s", d.Key, d.Sink)
}

// Report is the outcome of comparing one table of a sink with the source.
type Report struct {
	Seed       uint64
	Sink       string
	Table      string
	SourceRows int
	SinkRows   int // rows the sink showed, duplicates included
	Counts     map[DiffKind]int
	First      []Diff // the first differences, by kind then key
}

// Equal reports whether no difference was found.
func (r Report) Equal() bool { return len(r.First) == 0 }

// String summarizes the report: seed, sink, table, counts and the first differences.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workload seed %d, sink %s, table %s: %d source rows, %d sink rows", r.Seed, r.Sink, r.Table, r.SourceRows, r.SinkRows)
	if r.Equal() {
		b.WriteString(": equal")
		return b.String()
	}
	fmt.Fprintf(&b, "; %d missing, %d extra, %d stale, %d duplicated; first: ",
		r.Counts[Missing], r.Counts[Extra], r.Counts[Stale], r.Counts[Duplicated])
	for i, d := range r.First {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// Compare classifies the differences between the source's rows and the sink's rows of table
// t, key by key, and keeps the first max (sorted by kind, then key). expect maps a source value
// of a column to what the sink can show for it (nil: the value itself).
func Compare(t *Table, source, sink []Row, expect func(c Column, v string) string, max int) Report {
	r := Report{Table: t.Qualified(), SourceRows: len(source), SinkRows: len(sink), Counts: map[DiffKind]int{}}
	var all []Diff
	want := make(map[string]Row, len(source))
	for _, row := range source {
		if expect != nil {
			vals := make([]string, len(row.Values))
			for i, c := range t.Columns {
				vals[i] = expect(c, row.Values[i])
			}
			row = Row{Key: row.Key, Values: vals}
		}
		want[row.Key.String()] = row
	}
	got := make(map[string]Row, len(sink))
	seen := map[string]int{}
	for _, row := range sink {
		k := row.Key.String()
		seen[k]++
		if seen[k] == 2 {
			all = append(all, Diff{Kind: Duplicated, Key: k, Sink: strings.Join(row.Values, ", ")})
		}
		if _, dup := got[k]; !dup {
			got[k] = row
		}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			all = append(all, Diff{Kind: Missing, Key: k, Source: strings.Join(w.Values, ", ")})
			continue
		}
		for i, c := range t.Columns {
			if i < len(g.Values) && w.Values[i] != g.Values[i] {
				all = append(all, Diff{Kind: Stale, Key: k, Column: c.Name, Source: w.Values[i], Sink: g.Values[i]})
				break
			}
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			all = append(all, Diff{Kind: Extra, Key: k, Sink: strings.Join(g.Values, ", ")})
		}
	}
	order := map[DiffKind]int{Missing: 0, Extra: 1, Stale: 2, Duplicated: 3}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Kind != all[j].Kind {
			return order[all[i].Kind] < order[all[j].Kind]
		}
		return all[i].Key < all[j].Key
	})
	for _, d := range all {
		r.Counts[d.Kind]++
	}
	if len(all) > max {
		all = all[:max]
	}
	r.First = all
	return r
}

// Sink reads a sink's copy of a workload table as the sink's users would see it.
type Sink interface {
	// Name names the sink in reports.
	Name() string
	// Read returns every row of t the sink shows, in canonical text (see Canon), with a row
	// per appearance: a key visible twice is returned twice. universe lists every key the
	// source ever held, for sinks that cannot be listed.
	Read(ctx context.Context, t *Table, universe []Key) ([]Row, error)
	// Expect maps a canonical source value of c to what the sink can show for it, for the
	// values a sink stores with documented loss (e.g. whole seconds); most return v.
	Expect(c Column, v string) string
}

// Check reads t from the source and the sink and compares them (see Compare). The report
// carries the generator's seed.
func (g *Generator) Check(ctx context.Context, sink Sink, t *Table, max int) (Report, error) {
	src, err := g.readSource(ctx, t)
	if err != nil {
		return Report{}, g.errorf("%w", err)
	}
	got, err := sink.Read(ctx, t, g.Universe(t.Name))
	if err != nil {
		return Report{}, g.errorf("reading %s from %s: %w", t.Name, sink.Name(), err)
	}
	r := Compare(t, src, got, sink.Expect, max)
	r.Seed, r.Sink = g.seed, sink.Name()
	return r, nil
}
