package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"

	"github.com/sluicecdc/sluice/internal/logkey"
)

// sdkMetrics returns the Temporal SDK's metrics handler, exporting through OpenTelemetry to reg:
// the SDK's own integration, so the names are the standard ones of Temporal's SDK dashboards
// (temporal_request_total, temporal_workflow_task_execution_latency_seconds, ...) and every
// label the SDK sets is kept, whichever labels a metric's first use had.
func sdkMetrics(reg prometheus.Registerer, log *slog.Logger) (client.MetricsHandler, error) {
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("exporting the Temporal SDK's metrics to Prometheus: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	return temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                provider.Meter("temporal-sdk-go"),
		UseMonotonicCounters: true,
		OnError:              func(err error) { log.Warn("recording a Temporal SDK metric", logkey.Error, err) },
	}), nil
}
