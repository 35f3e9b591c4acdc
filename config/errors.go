package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Problem is one invalid setting: the key path it concerns and what is wrong with it, including
// the allowed values or the fix.
type Problem struct {
	Path string `json:"path"` // key path such as tables[2].metadata[0].from; empty for the whole config
	Msg  string `json:"msg"`
}

// Error returns "path: msg".
func (p Problem) Error() string {
	if p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

// Error is every problem found in one config. Decoding and validation return it (possibly
// wrapped) so that a user fixes all problems in one go; use errors.As to inspect the problems.
type Error struct {
	Problems []Problem
}

// Error lists the problems, one per line.
func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return "invalid config: " + e.Problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid config: %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the problems as errors, so errors.As can find a Problem.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// problems collects Problems while a config is decoded and validated. Paths listed in skip have
// already been reported (for example a value that could not be decoded) and get no second,
// derived problem. origins maps a key path to the environment variable that set it, so a problem
// in a value that came from the environment says where it came from.
type problems struct {
	list    []Problem
	skip    map[string]bool
	origins map[string]string
}

// add records a problem at path unless path or a key containing it was already reported.
func (ps *problems) add(path, format string, args ...any) {
	for p := path; ; {
		if ps.skip[p] {
			return
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	if path != "" && ps.skip[""] {
		return // the whole config could not be decoded
	}
	msg := fmt.Sprintf(format, args...)
	if env, ok := ps.origins[path]; ok {
		msg += " (set by environment variable " + env + ")"
	}
	ps.list = append(ps.list, Problem{Path: path, Msg: msg})
}

// err returns the collected problems as an *Error, or nil when there are none.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	sort.SliceStable(ps.list, func(i, j int) bool {
		return pathLess(ps.list[i].Path, ps.list[j].Path)
	})
	return &Error{Problems: ps.list}
}

// sectionOrder lists the top-level keys as a config file lists them.
const sectionOrder = "pipeline source temporal staging batch sink tables"

// pathLess orders problems as the config reads: by top-level section, then by table index.
// Problems of the same section (or table) keep the order they were found in.
func pathLess(a, b string) bool {
	ra, ia := pathRank(a)
	rb, ib := pathRank(b)
	if ra != rb {
		return ra < rb
	}
	return ia < ib
}

// pathRank returns the rank of a path's section and, for tables[i], the index i.
func pathRank(path string) (int, int) {
	head, _, _ := strings.Cut(path, ".")
	name, rest, _ := strings.Cut(head, "[")
	rank := 0 // unknown top-level keys come first
	for i, s := range strings.Fields(sectionOrder) {
		if s == name {
			rank = i + 1
		}
	}
	idx := -1
	if n, err := strconv.Atoi(strings.TrimSuffix(rest, "]")); err == nil {
		idx = n
	}
	return rank, idx
}
