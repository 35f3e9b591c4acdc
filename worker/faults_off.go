//go:build !faults

package main

import (
	"log/slog"
	"os"

	"go.temporal.io/sdk/interceptor"

	"github.com/sluicecdc/sluice/internal/faults"
)

// armFaults arms nothing: this worker is built without the faults tag, so it has no fault
// points and SLUICE_FAULTS cannot make it crash or lose data. A set variable is reported once at
// startup as ignored, so whoever set it does not believe it took effect.
func armFaults(log *slog.Logger) (*faults.Points, error) {
	if os.Getenv(faults.EnvVar) != "" {
		log.Warn(faults.EnvVar + " is ignored: this worker is built without fault points (they exist only in test builds, go build -tags faults)")
	}
	return nil, nil
}

// faultInterceptors is none: a worker without the faults tag has no fault points.
func faultInterceptors(*faults.Points) []interceptor.WorkerInterceptor { return nil }
