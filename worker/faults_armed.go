//go:build faults

package main

import (
	"log/slog"
	"os"

	"go.temporal.io/sdk/interceptor"

	"github.com/sluicecdc/sluice/internal/faults"
)

// armFaults reads the testing hook SLUICE_FAULTS (package internal/faults) in a worker built
// with the faults tag, as the end-to-end tests build it. Unset, it returns nil and the worker
// runs normally; set, the worker will SIGKILL itself (or break its commit path) on purpose, and
// says so loudly at startup.
func armFaults(log *slog.Logger) (*faults.Points, error) {
	p, err := faults.New(os.Getenv(faults.EnvVar), log.With("module", "faults"))
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
	return []interceptor.WorkerInterceptor{&faults.ActivityKiller{Points: p}}
}
