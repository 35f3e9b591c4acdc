package metrics

// The worker's HTTP endpoints, served on its --metrics-addr: what Prometheus scrapes and what
// Docker's, Compose's and Kubernetes' health checks ask. Defined once here, so the worker, its
// healthcheck subcommand and the checks of deploy/kubernetes/ agree.
const (
	// DefaultAddr is the worker's --metrics-addr unless given.
	DefaultAddr = "127.0.0.1:9464"
	// Path is the Prometheus scrape endpoint.
	Path = "/metrics"
	// HealthPath answers 200 while the worker polls its task queue and reaches Temporal (a
	// failing check is tolerated for a grace period): a liveness probe.
	HealthPath = "/healthz"
	// ReadyPath also wants the worker started and its last check of Temporal passed: a
	// readiness probe.
	ReadyPath = "/readyz"
)
