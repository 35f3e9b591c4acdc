package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/internal/logkey"
)

// MaintainAttempts bounds the attempts of one MaintainTable run: maintenance that keeps failing
// is reported in the table's status and tried again after the next MaintainEveryCommits batches,
// while the table goes on committing.
const MaintainAttempts = 5

// maintainActivity is the options of MaintainTable: an hour per attempt, heartbeats every few
// seconds (the worker's activities.Heartbeats), so a lost worker is noticed after
// ShortHeartbeat, and a bounded retry whose first retry comes after a second: the table's
// commits wait for maintenance, and a killed worker must not hold them back past the
// recovery bound (docs/architecture.md).
func maintainActivity() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    ShortHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    2 * time.Minute,
			MaximumAttempts:    MaintainAttempts,
		},
	}
}

// maintenanceDue reports whether MaintainEveryCommits batches that wrote rows were committed
// since the last maintenance.
func (t *table) maintenanceDue() bool {
	return t.opts.MaintainEveryCommits > 0 && t.sinceMaintenance >= t.opts.MaintainEveryCommits
}

// maintain runs MaintainTable between two commits (the sink's Maintain never overlaps a commit
// of the table, so its compaction does not race the commits it rewrites). Its outcome goes to
// the status and the log; a failure never fails the table. The only error it returns is the
// workflow's own cancellation.
func (t *table) maintain(ctx workflow.Context) error {
	t.sinceMaintenance = 0
	st := &MaintenanceStatus{Started: workflow.Now(ctx), Batches: t.batches}
	t.lastMaintenance = st
	actx := withSummary(workflow.WithActivityOptions(ctx, maintainActivity()), "maintain target "+t.in.Spec.Target+" (compaction, snapshot expiry)")
	var res activities.MaintainResult
	err := workflow.ExecuteActivity(actx, commitActs.MaintainTable, t.in.TableConfig).Get(ctx, &res)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st.Finished = workflow.Now(ctx)
	log := workflow.GetLogger(ctx)
	if err != nil {
		st.Error = maintenanceError(err)
		log.Warn("table maintenance failed; commits go on and it runs again later",
			logkey.Table, t.in.Table().String(), logkey.Error, st.Error)
		return nil
	}
	st.Result = &res
	log.Info("table maintenance done", logkey.Table, t.in.Table().String(), logkey.Message, res.Message)
	return nil
}

// maintenanceError is the cause of a failed MaintainTable without the activity error's wrapping.
func maintenanceError(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) && errors.Unwrap(actErr) != nil {
		return errors.Unwrap(actErr).Error()
	}
	return err.Error()
}
