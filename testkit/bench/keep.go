package bench

import (
	"fmt"
	"io"
	"regexp"
	"strings"
)

// The report is generated, but some of it is written by hand after a run: the causes of each
// missed goal, and the account of past fixes. Such text sits between two marker lines,
//
//	<!-- keep: NAME -->
//	...hand-written...
//	<!-- /keep: NAME -->
//
// and the next run copies it, unchanged, into the block of the same NAME. A block that the new
// report has no place for (the causes of a goal that is now met) is still copied, at the end,
// under "Kept from earlier runs": hand-written text is never dropped. A damaged block (a begin
// without its end, an end without its begin, a name twice) is an error, and the report is not
// written over: fix the markers by hand.

var (
	keepBegin = regexp.MustCompile(`^<!-- keep: (\S+) -->$`)
	keepEnd   = regexp.MustCompile(`^<!-- /keep: (\S+) -->$`)
)

// Kept holds the hand-written blocks of an earlier report, in their order, and which of them the
// new report has placed.
type Kept struct {
	order  []string
	blocks map[string]string
	used   map[string]bool
}

// ParseKept reads the kept blocks of doc (an earlier report; empty when there is none).
func ParseKept(doc string) (*Kept, error) {
	k := &Kept{blocks: map[string]string{}, used: map[string]bool{}}
	var (
		name  string // the open block, "" outside one
		body  []string
		start int
	)
	for i, line := range strings.Split(doc, "\n") {
		line = strings.TrimRight(line, "\r")
		if m := keepBegin.FindStringSubmatch(line); m != nil {
			if name != "" {
				return nil, fmt.Errorf("line %d: block %q begins inside block %q (line %d), which has no end marker", i+1, m[1], name, start)
			}
			if _, dup := k.blocks[m[1]]; dup {
				return nil, fmt.Errorf("line %d: block %q appears twice", i+1, m[1])
			}
			name, body, start = m[1], nil, i+1
			continue
		}
		if m := keepEnd.FindStringSubmatch(line); m != nil {
			if name != m[1] {
				return nil, fmt.Errorf("line %d: end marker of block %q without its begin marker", i+1, m[1])
			}
			k.order = append(k.order, name)
			k.blocks[name] = strings.Join(body, "\n")
			name = ""
			continue
		}
		if name != "" {
			body = append(body, line)
		}
	}
	if name != "" {
		return nil, fmt.Errorf("line %d: block %q has no end marker", start, name)
	}
	return k, nil
}

// Block returns block name, marked, holding the earlier report's text when it had that block and
// placeholder otherwise.
func (k *Kept) Block(name, placeholder string) string {
	body, ok := k.blocks[name]
	if !ok {
		body = strings.TrimRight(placeholder, "\n")
	}
	k.used[name] = true
	return fmt.Sprintf("<!-- keep: %s -->\n%s\n<!-- /keep: %s -->\n", name, body, name)
}

// WriteUnused writes, under one heading, every earlier block that Block was not asked for, but
// those holding only one of the placeholders: nothing was written by hand in them.
func (k *Kept) WriteUnused(w io.Writer, placeholders ...string) {
	var left []string
	for _, name := range k.order {
		if k.used[name] {
			continue
		}
		blank := strings.TrimSpace(k.blocks[name]) == ""
		for _, p := range placeholders {
			blank = blank || strings.TrimSpace(k.blocks[name]) == strings.TrimSpace(p)
		}
		if !blank {
			left = append(left, name)
		}
	}
	if len(left) == 0 {
		return
	}
	fmt.Fprint(w, "\n## Kept from earlier runs\n\nHand-written blocks of earlier reports that this run has no place for (a goal met since, for\nexample); delete them by hand when they are no longer useful.\n\n")
	for _, name := range left {
		fmt.Fprint(w, k.Block(name, ""))
		fmt.Fprintln(w)
	}
}
