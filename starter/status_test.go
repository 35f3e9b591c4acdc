package main

import (
	"testing"
	"time"

	"github.com/sluicecdc/sluice/workflows"
)

func TestAge(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{850 * time.Millisecond, "850ms"},
		{12*time.Second + 300*time.Millisecond, "12s"},
		{4*time.Minute + 10*time.Second, "4m10s"},
		{4 * time.Minute, "4m"},
		{3*time.Hour + 5*time.Minute + 20*time.Second, "3h5m"},
	} {
		if got := age(tc.d); got != tc.want {
			t.Errorf("age(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestLagAndMaintainedColumns(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name            string
		status          workflows.TableStatus
		lag, maintained string
	}{
		{"idle", workflows.TableStatus{}, "0", "-"},
		{"queued stream batches", workflows.TableStatus{LagBytes: 300 << 10, OldestQueuedCommit: now.Add(-3 * time.Second)}, "300 KiB, 3s", "-"},
		{"snapshot batches only", workflows.TableStatus{LagBytes: 5 << 20}, "5 MiB", "-"},
		{"maintenance running", workflows.TableStatus{LastMaintenance: &workflows.MaintenanceStatus{Started: now}}, "0", "running"},
		{"maintenance done", workflows.TableStatus{LastMaintenance: &workflows.MaintenanceStatus{Started: now.Add(-time.Hour), Finished: now.Add(-12 * time.Minute)}}, "0", "12m ago"},
		{"maintenance failed", workflows.TableStatus{LastMaintenance: &workflows.MaintenanceStatus{Started: now.Add(-time.Minute), Finished: now.Add(-30 * time.Second), Error: "catalog down"}}, "0", "30s ago (failed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tableRow{Status: tc.status}
			if got := lagOf(r, now); got != tc.lag {
				t.Errorf("lag = %q, want %q", got, tc.lag)
			}
			if got := maintainedOf(r, now); got != tc.maintained {
				t.Errorf("maintained = %q, want %q", got, tc.maintained)
			}
		})
	}
}
