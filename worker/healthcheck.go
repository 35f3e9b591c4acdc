package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicecdc/sluice/metrics"
)

// The endpoints of serveMetrics, and where they are served unless --metrics-addr says otherwise
// (the healthcheck subcommand asks there by default too).
const (
	defaultMetricsAddr = metrics.DefaultAddr
	healthPath         = metrics.HealthPath
	readyPath          = metrics.ReadyPath
)

// newHealthcheckCommand is `sluice-worker healthcheck`: a probe for images without a shell or
// an HTTP client (the distroless image), such as Docker's and Compose's HEALTHCHECK. It asks the
// worker's health endpoint and exits 0 when it answers 200, 1 otherwise, with a one-line reason.
func newHealthcheckCommand() *cobra.Command {
	var (
		addr    string
		ready   bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck [--metrics-addr ADDR] [--ready]",
		Short: "Ask a running worker's /healthz (or /readyz) and exit 0 when it is healthy, 1 otherwise",
		Long: "Asks the health endpoint of the worker serving on --metrics-addr (give it the worker's own\n" +
			"--metrics-addr; a listen address without a host, such as :9464, is asked on 127.0.0.1).\n" +
			"Exits 0 when the endpoint answers 200, 1 otherwise, printing one line that says why.",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := healthPath
			if ready {
				path = readyPath
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			msg, err := healthcheck(ctx, addr, path)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "metrics-addr", defaultMetricsAddr, "the worker's --metrics-addr")
	cmd.Flags().BoolVar(&ready, "ready", false, "ask "+readyPath+" (started and Temporal checked) instead of "+healthPath)
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

// healthcheck GETs path from the worker serving on listen address addr and returns a one-line
// summary when it answers 200; otherwise an error that says what answered, or what failed.
func healthcheck(ctx context.Context, addr, path string) (string, error) {
	target, err := probeAddr(addr)
	if err != nil {
		return "", err
	}
	url := "http://" + target + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("unhealthy: building the request for %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("unhealthy: no answer from %s (is the worker running with --metrics-addr %s?): %w", url, addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	reason := strings.Join(strings.Fields(string(body)), " ") // one line
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("unhealthy: %s answered %s: %s", url, resp.Status, reason)
	}
	return fmt.Sprintf("healthy: %s answered %s", url, reason), nil
}

// probeAddr turns a listen address into one to connect to: an empty or unspecified host
// (":9464", "0.0.0.0:9464", "[::]:9464") is asked on the loopback address.
func probeAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-addr %q: want host:port or :port: %w", addr, err)
	}
	if port == "0" {
		return "", fmt.Errorf("--metrics-addr %q: port 0 is chosen by the worker at start; give the port it logged (\"serving metrics\")", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}
