//go:build faults

package main

import (
	"context"
	"log/slog"
	"os"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/sluicecdc/sluice/internal/faults"
	"github.com/sluicecdc/sluice/internal/logkey"
)

// armFaults reads the testing hook SLUICE_FAULTS (package internal/faults) in a worker built
// with the faults tag, as the end-to-end tests build it. Unset, it returns nil and the worker
// runs normally; set, the worker will SIGKILL itself (or break its commit path) on purpose, and
// says so loudly at startup.
func armFaults(log *slog.Logger) (*faults.Points, error) {
	p, err := faults.New(os.Getenv(faults.EnvVar), log.With(logkey.Module, "faults"))
	if err != nil || p == nil {
		return nil, err
	}
	log.Warn("TESTING FAULTS ARMED: this worker will kill itself on purpose and may lose data; never set "+
		faults.EnvVar+" outside the fault-injection tests", "faults", p.String())
	return p, nil
}

// faultInterceptors are the worker interceptors of the armed faults: the ActivityKiller, which
// passes the point activity.start as each activity starts. None when nothing is armed.
func faultInterceptors(p *faults.Points) []interceptor.WorkerInterceptor {
	if p == nil {
		return nil
	}
	return []interceptor.WorkerInterceptor{&activityKiller{points: p}}
}

// activityKiller is a worker interceptor that passes the point ActivityStart at the start of
// every activity the worker runs, before the activity's code: an armed fault for that activity
// type kills the worker there. Only a build with the faults tag has it, so the product's
// activities carry no hook (and package faults imports nothing of Temporal).
type activityKiller struct {
	interceptor.WorkerInterceptorBase
	points *faults.Points
}

// InterceptActivity wraps one activity execution.
func (k *activityKiller) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &killerInbound{points: k.points}
	i.Next = next
	return i
}

type killerInbound struct {
	interceptor.ActivityInboundInterceptorBase
	points *faults.Points
}

func (i *killerInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	i.points.HitActivity(activity.GetInfo(ctx).ActivityType.Name)
	return i.Next.ExecuteActivity(ctx, in)
}
