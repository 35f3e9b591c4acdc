package localrun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestWaitForPausesAtLeastAsLongAsACheck checks WaitFor's duty cycle: after a check that took
// longer than the interval, the next check starts no sooner than that check took, so costly
// checks take at most half of the wait.
func TestWaitForPausesAtLeastAsLongAsACheck(t *testing.T) {
	cases := []struct {
		name     string
		interval time.Duration
		cost     time.Duration
		wantGap  time.Duration
	}{
		{"cheap check waits the interval", 40 * time.Millisecond, 0, 40 * time.Millisecond},
		{"costly check waits as long as it took", 5 * time.Millisecond, 60 * time.Millisecond, 60 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ends, starts []time.Time
			err := WaitFor(context.Background(), "three checks", time.Minute, tc.interval, func(context.Context) (bool, string, error) {
				starts = append(starts, time.Now())
				time.Sleep(tc.cost)
				ends = append(ends, time.Now())
				return len(starts) == 3, "", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(starts); i++ {
				if gap := starts[i].Sub(ends[i-1]); gap < tc.wantGap {
					t.Errorf("check %d started %s after the previous one ended, want at least %s", i+1, gap, tc.wantGap)
				}
			}
		})
	}
}

// TestWaitForNamesWhatItAwaited checks the error after the timeout: it names what was awaited
// and the last state the check reported.
func TestWaitForNamesWhatItAwaited(t *testing.T) {
	err := WaitFor(context.Background(), "the answer", 50*time.Millisecond, 10*time.Millisecond, func(context.Context) (bool, string, error) {
		return false, "still 41", nil
	})
	if err == nil || !strings.Contains(err.Error(), "the answer") || !strings.Contains(err.Error(), "still 41") {
		t.Fatalf("got %v, want an error naming the answer and the last state", err)
	}
	err = WaitFor(context.Background(), "the answer", 50*time.Millisecond, 10*time.Millisecond, func(context.Context) (bool, string, error) {
		return false, "", errors.New("unreachable")
	})
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("got %v, want the check's last error", err)
	}
}

// TestWaitForReturnsWhenACheckHangs checks that a check ignoring its context does not hold
// WaitFor past its deadline and grace: the error says the check did not return and keeps the
// state of the check before it.
func TestWaitForReturnsWhenACheckHangs(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	calls := 0
	began := time.Now()
	err := WaitFor(context.Background(), "the answer", 200*time.Millisecond, 10*time.Millisecond, func(context.Context) (bool, string, error) {
		calls++
		if calls == 1 {
			return false, "still 41", nil
		}
		<-release // ignores its context, as a client with a timeout of its own does
		return true, "", nil
	})
	if err == nil || !strings.Contains(err.Error(), "did not return") || !strings.Contains(err.Error(), "still 41") {
		t.Fatalf("got %v, want an error saying the check did not return, with the state before it", err)
	}
	if took := time.Since(began); took > 200*time.Millisecond+checkGrace+5*time.Second {
		t.Fatalf("WaitFor returned after %s, want about the timeout and the grace (%s)", took, 200*time.Millisecond+checkGrace)
	}
}
