//go:build !faults

package faults

import "github.com/sluicecdc/sluice/staging"

// Points are the faults armed in one process. In a build without the faults tag there are
// none: a Points holds nothing and every method is an empty body, which the compiler inlines
// away at each call site, whatever SLUICE_FAULTS says.
type Points struct{}

// String is "": nothing is armed in a build without the faults tag.
func (*Points) String() string { return "" }

// Fires is always false in a build without the faults tag.
func (*Points) Fires(Point, staging.BatchRef) bool { return false }

// Crash does nothing in a build without the faults tag.
func (*Points) Crash(Point, staging.BatchRef) {}

// Hit does nothing in a build without the faults tag.
func (*Points) Hit(Point, staging.BatchRef) {}
