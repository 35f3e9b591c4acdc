//go:build faults

package faults

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicecdc/sluice/staging"
)

// points are the known points, in the order error messages list them.
var points = []Point{CommitBeforeWrite, CommitAfterWrite, CommitAfterAck, CommitAckBeforeWrite, SnapshotAfterWrite, ActivityStart}

// Action is what a fault does when it fires.
type Action string

// The actions.
const (
	// Kill sends SIGKILL to the worker's own process (for a mutation: after breaking the path).
	Kill Action = "kill"
	// Hang blocks the goroutine that passes the point until the process ends (the test kills
	// it): the work in flight stops there, holding what it holds, without exiting.
	Hang Action = "hang"
)

// Fault is one armed fault: Action at the Nth pass of Point (for Table, or any table; for
// ActivityStart, at the Nth start of an activity of type Activity).
type Fault struct {
	Point    Point
	Action   Action
	Nth      int    // 1-based
	Table    string // "schema.table"; empty: every table, counted together
	Activity string // ActivityStart only: the activity type, e.g. "LoadTable"
}

// String returns the fault in the syntax of SLUICE_FAULTS.
func (f Fault) String() string {
	s := fmt.Sprintf("%s:%s@%d", f.Point, f.Action, f.Nth)
	if f.Table != "" {
		s += ":" + f.Table
	}
	if f.Activity != "" {
		s += ":" + f.Activity
	}
	return s
}

// Parse reads a SLUICE_FAULTS value: comma-separated POINT:ACTION[@N][:SCHEMA.TABLE], or
// activity.start:ACTION[@N]:ACTIVITYTYPE. Blank entries are ignored. The error lists every
// malformed fault and what is allowed.
func Parse(spec string) ([]Fault, error) {
	var out []Fault
	var errs []error
	for i, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		f, err := parseFault(item)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: fault %d %q: %w", EnvVar, i+1, item, err))
			continue
		}
		out = append(out, f)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w\n(syntax: POINT:ACTION[@N][:SCHEMA.TABLE] or %s:ACTION[@N]:ACTIVITYTYPE, comma-separated; actions: kill, hang; points: %s)", err, ActivityStart, pointList())
	}
	return out, nil
}

func parseFault(item string) (Fault, error) {
	parts := strings.Split(item, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Fault{}, errors.New("want POINT:ACTION[@N][:SCHEMA.TABLE]")
	}
	f := Fault{Point: Point(parts[0]), Nth: 1}
	if !slices.Contains(points, f.Point) {
		return Fault{}, fmt.Errorf("unknown point %q", parts[0])
	}
	action, nth, hasNth := strings.Cut(parts[1], "@")
	switch Action(action) {
	case Kill, Hang:
		f.Action = Action(action)
	default:
		return Fault{}, fmt.Errorf("unknown action %q: want %s or %s", action, Kill, Hang)
	}
	if hasNth {
		n, err := strconv.Atoi(nth)
		if err != nil || n < 1 {
			return Fault{}, fmt.Errorf("pass %q: want a whole number from 1", nth)
		}
		f.Nth = n
	}
	if f.Point == ActivityStart {
		if len(parts) != 3 || !isActivityType(parts[2]) {
			return Fault{}, fmt.Errorf("want %s:ACTION[@N]:ACTIVITYTYPE (an activity type such as LoadTable)", ActivityStart)
		}
		f.Activity = parts[2]
		return f, nil
	}
	if len(parts) == 3 {
		schema, name, ok := strings.Cut(parts[2], ".")
		if !ok || schema == "" || name == "" || strings.Contains(name, ".") {
			return Fault{}, fmt.Errorf("table %q: want SCHEMA.TABLE", parts[2])
		}
		f.Table = parts[2]
	}
	return f, nil
}

// isActivityType reports whether s can be an activity type: a Go identifier, as the worker
// registers its activities under their method names.
func isActivityType(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

func pointList() string {
	s := make([]string, len(points))
	for i, p := range points {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// Points are the faults armed in one process with their pass counters. A nil *Points has no
// faults: every method is a no-op. Its methods are safe for concurrent use.
type Points struct {
	faults []Fault
	log    *slog.Logger
	crash  func() // kills the process; this package's tests replace it to record instead

	mu     sync.Mutex
	passes []int // per fault: passes of its point (for its table) so far
}

// New arms the faults of spec (a SLUICE_FAULTS value), logging to log when one fires. An empty
// spec returns nil, the no-op.
func New(spec string, log *slog.Logger) (*Points, error) {
	faults, err := Parse(spec)
	if err != nil {
		return nil, err
	}
	if len(faults) == 0 {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Points{faults: faults, log: log, crash: killSelf, passes: make([]int, len(faults))}, nil
}

// String lists the armed faults in the syntax of SLUICE_FAULTS ("" for none).
func (p *Points) String() string {
	if p == nil {
		return ""
	}
	s := make([]string, len(p.faults))
	for i, f := range p.faults {
		s[i] = f.String()
	}
	return strings.Join(s, ",")
}

// Fires counts a pass of point with the batch ref (of table ref.Table) and reports whether a
// fault armed there fires on this pass. A fault fires once, on its Nth pass. Hook sites of a
// mutation call it, break the path, then call Crash; plain kill points call Hit.
func (p *Points) Fires(point Point, ref staging.BatchRef) bool {
	_, fires := p.fire(point, ref)
	return fires
}

// fire counts a pass of point and returns the action of the fault that fires on it, if any.
func (p *Points) fire(point Point, ref staging.BatchRef) (Action, bool) {
	if p == nil {
		return "", false
	}
	table := ref.Table.String()
	p.mu.Lock()
	defer p.mu.Unlock()
	var action Action
	fires := false
	for i, f := range p.faults {
		if f.Point != point || f.Activity != "" || (f.Table != "" && f.Table != table) {
			continue
		}
		p.passes[i]++
		if p.passes[i] == f.Nth {
			action, fires = f.Action, true
		}
	}
	return action, fires
}

// Crash logs that the fault at point fires on the batch ref, naming the batch (its table, range,
// hi and staged file, so a test can check the sink and the staging store at the crash), and
// SIGKILLs this process. It does not return.
func (p *Points) Crash(point Point, ref staging.BatchRef) {
	if p == nil {
		return
	}
	p.log.Error("fault injected: killing this process with SIGKILL (testing hook "+EnvVar+")",
		"point", string(point), "table", ref.Table.String(), "batch", ref.Range(),
		"hi", ref.Hi.Position.String(), "uri", ref.URI, "faults", p.String())
	p.crash()
}

// Hit is a pass of point with the batch ref: when a fault armed there fires, the process is
// SIGKILLed (kill) or the calling goroutine blocks until the process ends (hang); either way Hit
// does not return.
func (p *Points) Hit(point Point, ref staging.BatchRef) {
	action, fires := p.fire(point, ref)
	if !fires {
		return
	}
	if action == Hang {
		p.log.Error("fault injected: this copy hangs until the process is killed (testing hook "+EnvVar+")",
			"point", string(point), "table", ref.Table.String(), "faults", p.String())
		select {}
	}
	p.Crash(point, ref)
}

// HitActivity is the start of an activity of type activityType (point ActivityStart): when a
// fault armed there fires on this start, the process is SIGKILLed (kill) or the activity blocks
// until the process ends (hang); either way HitActivity does not return.
func (p *Points) HitActivity(activityType string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	var action Action
	fires := false
	for i, f := range p.faults {
		if f.Point != ActivityStart || f.Activity != activityType {
			continue
		}
		p.passes[i]++
		if p.passes[i] == f.Nth {
			action, fires = f.Action, true
		}
	}
	p.mu.Unlock()
	if !fires {
		return
	}
	if action == Hang {
		p.log.Error("fault injected: this activity hangs until the process is killed (testing hook "+EnvVar+")",
			"point", string(ActivityStart), "activity", activityType, "faults", p.String())
		select {}
	}
	p.log.Error("fault injected: killing this process with SIGKILL (testing hook "+EnvVar+")",
		"point", string(ActivityStart), "activity", activityType, "faults", p.String())
	p.crash()
}
