package iceberg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// MaintenanceOptions tune Maintain.
type MaintenanceOptions struct {
	// TargetFileSizeBytes is the size compacted data files aim for; zero means the sink's
	// target_file_size_bytes. Files under 75% of it are compaction candidates.
	TargetFileSizeBytes int64
	// MinInputFiles is the fewest small files worth a rewrite; zero means 5.
	MinInputFiles uint
	// DeleteFileThreshold rewrites a data file of any size once this many delete files apply to
	// it; zero means 5.
	DeleteFileThreshold int
	// RetainSnapshots is the fewest snapshots kept on the main branch; zero means 10. Expiry also
	// always keeps every snapshot back to the newest one whose summary carries the position.
	RetainSnapshots int
	// MaxSnapshotAge: snapshots beyond RetainSnapshots that are older than this are expired, and
	// their unreferenced files deleted. Zero expires them regardless of age.
	MaxSnapshotAge time.Duration
	// OrphanFileAge: files under the table's location that no snapshot references and that are
	// older than this are deleted (files of failed commits whose outcome was unknown, so Apply
	// could not remove them safely). Zero skips orphan cleanup. Keep it well above the longest
	// commit: a younger unreferenced file may belong to a commit in flight.
	OrphanFileAge time.Duration
}

// DefaultMaintenanceOptions are the settings the scheduled maintenance uses unless configured:
// snapshots are kept for an hour so running readers are not cut off, and unreferenced files for
// sink.iceberg.maintenance.remove_orphans_after's default.
func DefaultMaintenanceOptions() MaintenanceOptions {
	return MaintenanceOptions{RetainSnapshots: 10, MaxSnapshotAge: time.Hour, OrphanFileAge: config.DefaultRemoveOrphansAfter.D()}
}

// MaintenanceResult says what Maintain did.
type MaintenanceResult struct {
	RemovedDataFiles    int // data files compacted away
	AddedDataFiles      int // data files compaction wrote
	RemovedDeleteFiles  int // equality and position delete files no longer needed
	RewrittenManifests  int // manifests replaced by the manifest rewrite
	AddedManifests      int // manifests the rewrite wrote
	ExpiredSnapshots    int // snapshots removed from the metadata
	RemovedOrphanFiles  int // unreferenced files deleted
	CompactionConflicts int // steps skipped because a batch was committed meanwhile
}

// Maintain runs MaintainWith on spec's target with the options the sink was created with
// (Options.Maintenance). It implements sinks.Maintainer: the scheduled maintenance of the
// TableWorkflow calls it every N committed batches.
func (s *Sink) Maintain(ctx context.Context, spec sinks.TableSpec) (sinks.MaintenanceReport, error) {
	res, err := s.MaintainWith(ctx, spec.Target, s.maintenance)
	if err != nil {
		return nil, err
	}
	return res.Report(), nil
}

// Report returns r as the counters of a sinks.MaintenanceReport, leaving out zeros.
func (r MaintenanceResult) Report() sinks.MaintenanceReport {
	rep := sinks.MaintenanceReport{}
	for name, n := range map[string]int{
		"removed_data_files": r.RemovedDataFiles, "added_data_files": r.AddedDataFiles,
		"removed_delete_files": r.RemovedDeleteFiles, "rewritten_manifests": r.RewrittenManifests,
		"added_manifests": r.AddedManifests, "expired_snapshots": r.ExpiredSnapshots,
		"removed_orphan_files": r.RemovedOrphanFiles, "compaction_conflicts": r.CompactionConflicts,
	} {
		if n != 0 {
			rep[name] = int64(n)
		}
	}
	return rep
}

// MaintainWith compacts the target table's small data files (applying and dropping the delete files
// that no longer match anything), rewrites its manifests and expires old snapshots. Each step is
// its own commit pinned to the branch head it read: a batch committed meanwhile makes that step
// fail cleanly (counted in CompactionConflicts, done on the next run) instead of racing it. The
// committed position stays readable: compaction and manifest snapshots carry none, and expiry
// keeps every snapshot back to the newest one that does (Position walks back to it), besides the
// table property. Safe to run at any time; it never changes the visible rows.
func (s *Sink) MaintainWith(ctx context.Context, target string, opts MaintenanceOptions) (MaintenanceResult, error) {
	var res MaintenanceResult
	ident, err := identifier(target)
	if err != nil {
		return res, err
	}
	if opts.TargetFileSizeBytes <= 0 {
		opts.TargetFileSizeBytes = int64(s.cfg.TargetFileSizeBytes)
	}
	if opts.RetainSnapshots <= 0 {
		opts.RetainSnapshots = 10
	}
	steps := []func(context.Context, *table.Table, MaintenanceOptions, *MaintenanceResult) error{
		s.compact, s.rewriteManifests, s.expire, s.removeOrphans,
	}
	for _, step := range steps {
		tbl, err := s.cat.LoadTable(ctx, ident)
		if err != nil {
			return res, fmt.Errorf("loading iceberg table %s: %w", target, err)
		}
		if tbl.CurrentSnapshot() == nil {
			return res, nil
		}
		err = step(ctx, tbl, opts, &res)
		if errors.Is(err, table.ErrCommitFailed) {
			res.CompactionConflicts++
			s.log.InfoContext(ctx, "maintenance step raced a commit; it runs again next time", logkey.Target, target, logkey.Error, err)
			continue
		}
		if err != nil {
			return res, fmt.Errorf("maintaining iceberg table %s: %w", target, err)
		}
	}
	s.log.InfoContext(ctx, "maintained iceberg table", logkey.Target, target,
		logkey.RemovedDataFiles, res.RemovedDataFiles, logkey.AddedDataFiles, res.AddedDataFiles,
		logkey.RemovedDeleteFiles, res.RemovedDeleteFiles, logkey.RewrittenManifests, res.RewrittenManifests,
		logkey.ExpiredSnapshots, res.ExpiredSnapshots, logkey.RemovedOrphanFiles, res.RemovedOrphanFiles)
	return res, nil
}

func (s *Sink) compact(ctx context.Context, tbl *table.Table, opts MaintenanceOptions, res *MaintenanceResult) error {
	cfg := compaction.DefaultConfig()
	cfg.TargetFileSizeBytes = opts.TargetFileSizeBytes
	cfg.MinFileSizeBytes = opts.TargetFileSizeBytes * 3 / 4
	cfg.MaxFileSizeBytes = opts.TargetFileSizeBytes * 9 / 5
	if opts.MinInputFiles > 0 {
		cfg.MinInputFiles = opts.MinInputFiles
	}
	if opts.DeleteFileThreshold > 0 {
		cfg.DeleteFileThreshold = opts.DeleteFileThreshold
	}
	plan, err := compaction.Analyze(ctx, tbl, cfg)
	if err != nil {
		return fmt.Errorf("planning compaction: %w", err)
	}
	if len(plan.Groups) == 0 {
		return nil
	}
	groups := make([]table.CompactionTaskGroup, len(plan.Groups))
	rewritten := map[string]struct{}{}
	for i, g := range plan.Groups {
		groups[i] = table.CompactionTaskGroup{PartitionKey: g.PartitionKey, Tasks: g.Tasks, TotalSizeBytes: g.TotalSizeBytes}
		for _, t := range g.Tasks {
			rewritten[t.File.FilePath()] = struct{}{}
		}
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("opening the table's file system: %w", err)
	}
	dead, err := compaction.CollectDeadEqualityDeletesWithSpecs(ctx, fs, tbl.Metadata(), tbl.CurrentSnapshot(), rewritten)
	if err != nil {
		return fmt.Errorf("finding dead equality deletes: %w", err)
	}
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return fmt.Errorf("pinning the branch head: %w", err)
	}
	out, err := tx.RewriteDataFiles(ctx, groups, table.RewriteDataFilesOptions{
		ExtraDeleteFilesToRemove: dead,
		GroupOptions:             []table.CompactionGroupOption{table.WithCompactionTargetFileSize(opts.TargetFileSizeBytes)},
	})
	if err != nil {
		return fmt.Errorf("rewriting data files: %w", err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing compaction: %w", err)
	}
	res.RemovedDataFiles += out.RemovedDataFiles
	res.AddedDataFiles += out.AddedDataFiles
	res.RemovedDeleteFiles += out.RemovedEqualityDeleteFiles + out.RemovedPositionDeleteFiles + out.RemovedDeletionVectorFiles
	return nil
}

func (s *Sink) rewriteManifests(ctx context.Context, tbl *table.Table, _ MaintenanceOptions, res *MaintenanceResult) error {
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return fmt.Errorf("pinning the branch head: %w", err)
	}
	out, err := tx.RewriteManifests(ctx)
	if err != nil {
		return fmt.Errorf("rewriting manifests: %w", err)
	}
	if out.IsNoOp() {
		return nil
	}
	if _, err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing the manifest rewrite: %w", err)
	}
	res.RewrittenManifests += len(out.RewrittenManifests)
	res.AddedManifests += len(out.AddedManifests)
	return nil
}

func (s *Sink) expire(ctx context.Context, tbl *table.Table, opts MaintenanceOptions, res *MaintenanceResult) error {
	retain := max(opts.RetainSnapshots, positionDepth(tbl))
	before := len(tbl.Metadata().Snapshots())
	tx := tbl.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithRetainLast(retain), table.WithOlderThan(opts.MaxSnapshotAge)); err != nil {
		return fmt.Errorf("expiring snapshots: %w", err)
	}
	after, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("committing snapshot expiry: %w", err)
	}
	res.ExpiredSnapshots += before - len(after.Metadata().Snapshots())
	return nil
}

func (s *Sink) removeOrphans(ctx context.Context, tbl *table.Table, opts MaintenanceOptions, res *MaintenanceResult) error {
	if opts.OrphanFileAge <= 0 {
		return nil
	}
	out, err := tbl.DeleteOrphanFiles(ctx, table.WithFilesOlderThan(opts.OrphanFileAge))
	if err != nil {
		return fmt.Errorf("removing orphan files: %w", err)
	}
	res.RemovedOrphanFiles += len(out.OrphanFileLocations)
	return nil
}
