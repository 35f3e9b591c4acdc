package iceberg

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// crashEnv carries the helper's parameters (JSON crashParams) to the re-executed test binary.
const crashEnv = "SLUICE_ICEBERG_CRASH_HELPER"

// crashParams says where the helper process dies: with BeforeCommit once the batch's data and
// delete files are written and before the catalog commit, else just after the commit (Apply
// returned: the data and the position are committed, CommitBatch has not acknowledged).
type crashParams struct {
	Config       Config `json:"config"`
	BeforeCommit bool   `json:"before_commit"`
}

// crashRows is how many keys the batch before the crash inserts.
const crashRows = 200

// crashBatches builds, on h, the batch committed before the crash (keys 1..crashRows) and the
// batch the helper is killed in (updates of the first half, deletes of the next quarter, inserts
// of crashRows/2 new keys), with the image of the table after each. Both processes build the
// same batches.
func crashBatches(h *harness) (before, crash sinks.Batch, beforeRows, want map[int64]row) {
	beforeRows, want = map[int64]row{}, map[int64]row{}
	var first, second []batch.Change
	for id := int64(1); id <= crashRows; id++ {
		first = append(first, orders.Insert(id, "v1", int(id)))
		beforeRows[id], want[id] = row{"v1", id}, row{"v1", id}
	}
	for id := int64(1); id <= crashRows/2; id++ {
		second = append(second, orders.Update(id, "v2", int(id)*10))
		want[id] = row{"v2", id * 10}
	}
	for id := int64(crashRows/2 + 1); id <= crashRows*3/4; id++ {
		second = append(second, orders.Delete(id))
		delete(want, id)
	}
	for id := int64(crashRows + 1); id <= crashRows*3/2; id++ {
		second = append(second, orders.Insert(id, "new", int(id)))
		want[id] = row{"new", id}
	}
	return h.batch(batch.PhaseStream, first...), h.batch(batch.PhaseStream, second...), beforeRows, want
}

// TestKilledMidCommit SIGKILLs a process inside Apply at the two points of an Iceberg commit:
// after the batch's data and equality delete files are written and before the catalog commit
// (before-commit), and after the commit (after-commit). With no process alive it asserts the
// invariant at the crash point: the table's position is the batch's exactly when its rows are
// visible, never ahead of them, and no part of the batch is visible without it (Iceberg commits
// the data and the position in one catalog commit, docs/guarantees.md). Then the batch is
// applied again, as CommitBatch's retry does: the table converges (or the replay is skipped, the
// table already holding it), and maintenance's orphan removal deletes the files the killed
// attempt wrote but never committed, leaving exactly the live ones.
func TestKilledMidCommit(t *testing.T) {
	var hp crashParams
	if testenv.HelperParams(t, crashEnv, &hp) {
		crashHelper(t, hp)
		return
	}
	for _, tc := range []struct {
		name         string
		beforeCommit bool
	}{
		{"before-commit", true},
		{"after-commit", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := Config{
				Catalog:   CatalogConfig{Type: CatalogSQL, Dialect: DialectSQLite, URI: filepath.Join(dir, "catalog.db")},
				Warehouse: "file://" + filepath.Join(dir, "warehouse"),
			}
			h := newHarness(t, &cfg)
			before, crash, beforeRows, want := crashBatches(h)
			if err := h.sink.Apply(t.Context(), before); err != nil {
				t.Fatalf("Apply before the crash: %v", err)
			}
			liveBefore := countFiles(t, h.table().Location())

			testenv.RunKilledHelper(t, "^TestKilledMidCommit$", crashEnv, crashParams{Config: cfg, BeforeCommit: tc.beforeCommit})

			// The crash point, no process alive.
			pos, ok := h.position()
			rows := h.rows()
			onDisk := countFiles(t, h.table().Location())
			if tc.beforeCommit {
				if !ok || pos != before.Hi {
					t.Fatalf("killed before the commit, Position = %v, %v; want the previous batch's %s", pos, ok, before.Hi)
				}
				if d := sinktest.DiffRows(beforeRows, rows); d != "" {
					t.Fatalf("killed before the commit, part of the killed batch is visible:\n%.2000s", d)
				}
				if onDisk <= liveBefore {
					t.Fatalf("%d parquet files after the kill, %d before: the helper died before writing its files", onDisk, liveBefore)
				}
			} else {
				if !ok || pos != crash.Hi {
					t.Fatalf("killed after the commit, Position = %v, %v; want the killed batch's %s", pos, ok, crash.Hi)
				}
				if d := sinktest.DiffRows(want, rows); d != "" {
					t.Fatalf("killed after the commit, the rows are not the killed batch's:\n%.2000s", d)
				}
			}
			t.Logf("crash point: position %s, %d rows visible, %d parquet files (%d before the killed batch)", pos, len(rows), onDisk, liveBefore)

			// The retry.
			snapshots := len(h.table().Metadata().Snapshots())
			if err := h.sink.Apply(t.Context(), crash); err != nil {
				t.Fatalf("Apply after the kill: %v", err)
			}
			if d := sinktest.DiffRows(want, h.rows()); d != "" {
				t.Errorf("after re-applying the killed batch:\n%.2000s", d)
			}
			if pos, ok := h.position(); !ok || pos != crash.Hi {
				t.Errorf("after the replay Position = %v, %v; want %s", pos, ok, crash.Hi)
			}
			if n := len(h.table().Metadata().Snapshots()); !tc.beforeCommit && n != snapshots {
				t.Errorf("the replay of a committed batch made %d snapshots, want none (skipped)", n-snapshots)
			}

			// The killed attempt's files are orphans; maintenance removes them and nothing live.
			res, err := h.sink.MaintainWith(t.Context(), h.spec.Target, MaintenanceOptions{OrphanFileAge: time.Nanosecond, MinInputFiles: 100})
			if err != nil {
				t.Fatalf("Maintain: %v", err)
			}
			data, dels, err := liveFiles(t.Context(), h.table())
			if err != nil {
				t.Fatal(err)
			}
			if n := countFiles(t, h.table().Location()); n != len(data)+len(dels) {
				t.Errorf("%d parquet files after orphan removal (%d removed), want the %d live ones", n, res.RemovedOrphanFiles, len(data)+len(dels))
			}
			if tc.beforeCommit && res.RemovedOrphanFiles == 0 {
				t.Errorf("orphan removal removed nothing; the killed attempt's files remain")
			}
			if d := sinktest.DiffRows(want, h.rows()); d != "" {
				t.Errorf("after orphan removal:\n%.2000s", d)
			}
		})
	}
}

// crashHelper is the process that gets killed: it applies the crash batch on the parent's
// catalog and warehouse and dies at its crash point.
func crashHelper(t *testing.T, p crashParams) {
	h := newHarness(t, &p.Config)
	_, crash, _, _ := crashBatches(h)
	if p.BeforeCommit {
		h.sink.beforeCommit = func(context.Context) { testenv.KillSelf() }
	}
	if err := h.sink.Apply(t.Context(), crash); err != nil {
		t.Fatalf("helper Apply: %v", err)
	}
	// After the commit: Apply returned, CommitBatch would acknowledge the staged file next.
	testenv.KillSelf()
}
