package workflows

import (
	"testing"
	"time"

	"github.com/sluicecdc/sluice/staging"
)

func TestOldestCommit(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		q    []staging.BatchRef
		want time.Time
	}{
		{"empty queue", nil, time.Time{}},
		{"snapshot batches carry no commit time", []staging.BatchRef{{}, {}}, time.Time{}},
		{"earliest wins, whatever the order", []staging.BatchRef{{FirstCommit: t0.Add(time.Second)}, {}, {FirstCommit: t0}, {FirstCommit: t0.Add(2 * time.Second)}}, t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := oldestCommit(tc.q); !got.Equal(tc.want) {
				t.Errorf("oldestCommit = %s, want %s", got, tc.want)
			}
		})
	}
}
