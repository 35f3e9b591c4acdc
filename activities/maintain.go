package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sluicecdc/sluice/commit"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// MaintainResult says what MaintainTable did. It is the activity's result, so the Web UI shows it
// on the table's workflow.
type MaintainResult struct {
	// Supported is false when the table's sink has no maintenance (it does not implement
	// sinks.Maintainer); nothing ran.
	Supported bool `json:"supported"`
	// Report counts what the sink did (removed_data_files, expired_snapshots, ...).
	Report sinks.MaintenanceReport `json:"report,omitempty"`
	// Duration is how long the sink's maintenance took.
	Duration time.Duration `json:"duration"`
	// Message sums the outcome up in words.
	Message string `json:"message"`
}

// MaintainTable runs the sink's table maintenance (compaction, manifest rewrite, snapshot expiry)
// on the table's target when the sink implements sinks.Maintainer, heartbeating while it runs; a
// sink without maintenance returns a result saying so. It never changes the visible rows or the
// committed position and is safe to retry: a poison failure becomes a non-retryable
// MaintenanceFailed error, others are retried. The TableWorkflow runs it between commits and
// goes on committing whatever it returns.
func (a *Commit) MaintainTable(ctx context.Context, in TableConfig) (_ MaintainResult, err error) {
	defer convert(&err)
	if err := a.Authority.CheckTable(in); err != nil {
		return MaintainResult{}, err
	}
	sink, err := a.Sinks.Sink(ctx, in.Sink)
	if err != nil {
		return MaintainResult{}, fmt.Errorf("opening sink %s for table %s: %w", in.Sink.Name, in.Table(), err)
	}
	m, ok := sink.(sinks.Maintainer)
	if !ok {
		return MaintainResult{Message: fmt.Sprintf("sink %s has no table maintenance; nothing to do", in.Sink.Name)}, nil
	}
	stop := a.heartbeat(ctx, "maintaining "+in.Spec.Target)
	defer stop()

	start := time.Now()
	rep, err := m.Maintain(ctx, in.Spec)
	a.Metrics.Maintained(in.Pipeline, in.Table().String(), time.Since(start), err)
	if err := commit.SinkErrorAs(in, "maintaining target", failure.MaintenanceFailed,
		"commits go on, the next maintenance runs after the configured number of commits", err); err != nil {
		return MaintainResult{}, err
	}
	res := MaintainResult{Supported: true, Report: rep, Duration: time.Since(start)}
	res.Message = fmt.Sprintf("maintained %s in %s", in.Spec.Target, res.Duration.Round(time.Millisecond))
	if len(rep) == 0 {
		res.Message += ": nothing to do"
	}
	activity.GetLogger(ctx).Info("maintained table", logkey.Table, in.Table().String(), logkey.Target, in.Spec.Target,
		logkey.Duration, res.Duration, logkey.Report, rep)
	return res, nil
}
