package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
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

func TestReportProblems(t *testing.T) {
	t.Parallel()
	healthySlot := &source.SlotState{Slot: "s", Exists: true, Active: true, WALStatus: source.WALReserved, Current: 5000}
	queued := tableRow{Table: "public.a", Status: workflows.TableStatus{HasPosition: true, QueueLength: 2,
		Position: batch.SourcePosition{Position: batch.Position{LSN: 1000}}}}
	for _, tc := range []struct {
		name      string
		rep       statusReport
		problems  []string // substrings, in order
		tableErr  string   // substring of the first table's error
		holdsWant int64
	}{
		{name: "healthy", rep: statusReport{Reader: readerRow{State: readerRunning}, Slot: healthySlot, Tables: []tableRow{queued}}, holdsWant: 4000},
		{name: "idle table holds nothing", rep: statusReport{Reader: readerRow{State: readerRunning}, Slot: healthySlot,
			Tables: []tableRow{{Table: "public.a", Status: workflows.TableStatus{HasPosition: true}}}}},
		{name: "reader failed", rep: statusReport{Reader: readerRow{State: readerFailed, Error: "SlotLost: slot s was dropped"}, Slot: &source.SlotState{Slot: "s"},
			Tables: []tableRow{{Table: "public.a"}}},
			problems: []string{"the reader failed: SlotLost", "replication slot s does not exist"}, tableErr: "SlotLost: slot s was dropped"},
		{name: "retrying is not a failure", rep: statusReport{Reader: readerRow{State: readerRetrying, Error: "connection refused"}, Slot: healthySlot}},
		{name: "stopped pipeline without slot", rep: statusReport{Reader: readerRow{State: readerStopped}, Slot: &source.SlotState{Slot: "s"}}},
		{name: "slot lost", rep: statusReport{Reader: readerRow{State: readerRunning}, Slot: &source.SlotState{Slot: "s", Exists: true, WALStatus: source.WALLost}},
			problems: []string{"slot s was invalidated"}},
		{name: "table failed keeps its own error", rep: statusReport{Reader: readerRow{State: readerFailed, Error: "x"}, Slot: healthySlot,
			Tables: []tableRow{{Table: "public.a", Failed: true, Err: "PoisonBatch: bad"}}},
			problems: []string{"the reader failed", "table public.a failed"}, tableErr: "PoisonBatch: bad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := tc.rep
			rep.assess()
			if len(rep.Problems) != len(tc.problems) {
				t.Fatalf("problems = %q, want %d like %q", rep.Problems, len(tc.problems), tc.problems)
			}
			for i, want := range tc.problems {
				if !strings.Contains(rep.Problems[i], want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, rep.Problems[i], want)
				}
			}
			if len(rep.Tables) > 0 {
				if !strings.Contains(rep.Tables[0].Err, tc.tableErr) {
					t.Errorf("table error = %q, want it to contain %q", rep.Tables[0].Err, tc.tableErr)
				}
				if rep.Tables[0].HoldsBytes != tc.holdsWant {
					t.Errorf("holds = %d, want %d", rep.Tables[0].HoldsBytes, tc.holdsWant)
				}
			}
		})
	}
}

func TestSlotLine(t *testing.T) {
	t.Parallel()
	safe := int64(3 << 20)
	for _, tc := range []struct {
		name string
		s    source.SlotState
		want []string
	}{
		{"missing", source.SlotState{Slot: "s", Current: 0x16B3748}, []string{"s does not exist", "0/16B3748"}},
		{"unlimited", source.SlotState{Slot: "s", Exists: true, Active: true, ActivePID: 42, WALStatus: "reserved", RetainedBytes: 2 << 20, KeepUnlimited: true, MaxSlotWALKeepSize: "-1"},
			[]string{"active (pid 42)", "wal_status reserved", "retained WAL 2 MiB", "safe_wal_size unlimited"}},
		{"limited", source.SlotState{Slot: "s", Exists: true, WALStatus: "extended", SafeWALSize: &safe, MaxSlotWALKeepSize: "64MB"},
			[]string{"inactive", "safe_wal_size 3 MiB (max_slot_wal_keep_size 64MB)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := slotLine(&tc.s)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("slotLine = %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

func TestWALGuard(t *testing.T) {
	t.Parallel()
	safe := int64(10 << 20)
	for _, tc := range []struct {
		name string
		s    source.SlotState
		want []string
		not  []string
	}{
		{"unlimited", source.SlotState{Slot: "s", Exists: true, RetainedBytes: 3 << 20, WALStatus: "reserved", KeepUnlimited: true, MaxSlotWALKeepSize: "-1"},
			[]string{"slot s retains 3 MiB of WAL", "warning: max_slot_wal_keep_size is -1 (unlimited)", "until its disk is full", "docs/operations.md"}, nil},
		{"limited", source.SlotState{Slot: "s", Exists: true, WALStatus: "extended", SafeWALSize: &safe, MaxSlotWALKeepSize: "1GB"},
			[]string{"max_slot_wal_keep_size is 1GB: 10 MiB more WAL", "resynced"}, []string{"warning"}},
		{"no slot yet", source.SlotState{Slot: "s", KeepUnlimited: true, MaxSlotWALKeepSize: "-1"}, []string{"does not exist yet", "warning"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			printWALGuard(&b, tc.s)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output does not say %q:\n%s", w, b.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("output says %q:\n%s", w, b.String())
				}
			}
		})
	}
}

// TestWideShowsWholeErrors: the text status cuts a long error at 160 characters, --wide shows
// it whole (on one line), for a table and for the reader.
func TestWideShowsWholeErrors(t *testing.T) {
	t.Parallel()
	long := "PoisonBatch: table public.a, batch 0/1A2B..0/1A3C: column qty: " + strings.Repeat("cannot cast text to int; ", 10) + "THE END"
	rep := statusReport{
		Pipeline: "p",
		Reader:   readerRow{State: readerFailed, Workflow: "FAILED", Error: "reader: " + long},
		Tables:   []tableRow{{Table: "public.a", Workflow: "FAILED", Failed: true, Err: long + "\nsecond line"}},
	}
	for _, tc := range []struct {
		wide     bool
		whole    bool
		contains string
	}{
		{wide: false, whole: false, contains: "..."},
		{wide: true, whole: true, contains: "THE END second line"},
	} {
		var b strings.Builder
		printReport(&b, rep, tc.wide)
		out := b.String()
		if got := strings.Count(out, "THE END"); (got == 2) != tc.whole {
			t.Errorf("wide=%v: the whole error appears %d times, want whole=%v:\n%s", tc.wide, got, tc.whole, out)
		}
		if !strings.Contains(out, tc.contains) {
			t.Errorf("wide=%v: output lacks %q:\n%s", tc.wide, tc.contains, out)
		}
	}
}
