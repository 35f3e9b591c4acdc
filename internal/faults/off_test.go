//go:build !faults

package faults

import (
	"testing"

	"github.com/sluicecdc/sluice/staging"
)

// TestUntaggedPointsNeverFire checks that, without the faults tag, a Points (nil or not) never
// fires and Hit and Crash return: the product's hook sites do nothing.
func TestUntaggedPointsNeverFire(t *testing.T) {
	t.Parallel()
	for _, p := range []*Points{nil, {}} {
		for _, point := range []Point{CommitBeforeWrite, CommitAfterWrite, CommitAfterAck, CommitAckBeforeWrite} {
			if p.Fires(point, staging.BatchRef{}) {
				t.Errorf("%s fired in a build without the faults tag", point)
			}
			p.Hit(point, staging.BatchRef{})
			p.Crash(point, staging.BatchRef{})
		}
		if p.String() != "" {
			t.Errorf("String() = %q, want \"\"", p.String())
		}
	}
}
