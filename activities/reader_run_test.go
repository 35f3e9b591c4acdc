package activities

import (
	"testing"
	"time"
)

func TestTickEveryCutsBatchesCloseToTheirMaxWait(t *testing.T) {
	for _, tc := range []struct {
		maxWait, want time.Duration
	}{
		{time.Second, 100 * time.Millisecond},
		{5 * time.Second, 500 * time.Millisecond},
		{time.Minute, time.Second},                     // never less often than the old fixed second
		{50 * time.Millisecond, 10 * time.Millisecond}, // never busier than every 10 ms
	} {
		if got := tickEvery(tc.maxWait); got != tc.want {
			t.Errorf("tickEvery(%s) = %s, want %s", tc.maxWait, got, tc.want)
		}
	}
}
