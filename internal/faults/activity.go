//go:build faults

package faults

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// ActivityKiller is a worker interceptor that passes the point ActivityStart at the start of
// every activity the worker runs, before the activity's code: an armed fault for that activity
// type kills the worker there. Only a build with the faults tag has it (the worker adds it when
// faults are armed), so the product's activities carry no hook.
type ActivityKiller struct {
	interceptor.WorkerInterceptorBase
	Points *Points
}

// InterceptActivity wraps one activity execution.
func (k *ActivityKiller) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &killerInbound{points: k.Points}
	i.Next = next
	return i
}

type killerInbound struct {
	interceptor.ActivityInboundInterceptorBase
	points *Points
}

func (i *killerInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	i.points.HitActivity(activity.GetInfo(ctx).ActivityType.Name)
	return i.Next.ExecuteActivity(ctx, in)
}
