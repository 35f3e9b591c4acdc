package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
)

// SearchAttributes are the custom search attributes Sluice's workflows upsert, registered when
// the dev server starts so that the Web UI and `temporal workflow list --query` can filter on them.
var SearchAttributes = map[string]string{
	"SluicePipeline": "Keyword",
	"SluiceTable":    "Keyword",
	"SluicePhase":    "Keyword",
}

func (s *Stack) startTemporal(ctx context.Context) (Info, error) {
	bin, err := s.tool("temporal", filepath.Join(s.Cache, "bin", "temporal"))
	if err != nil {
		return Info{}, err
	}
	dir := s.serviceDir(ServiceTemporal)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Info{}, fmt.Errorf("creating %s: %w", dir, err)
	}
	ports := make([]int, 4)
	ports[0] = s.previousPort(ServiceTemporal) // a restarted server keeps its frontend address
	for i := range ports {
		if ports[i] != 0 {
			continue
		}
		if ports[i], err = freePort(); err != nil {
			return Info{}, err
		}
	}
	grpcPort, uiPort, httpPort, metricsPort := ports[0], ports[1], ports[2], ports[3]
	args := []string{"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(grpcPort),
		"--ui-port", strconv.Itoa(uiPort),
		"--http-port", strconv.Itoa(httpPort),
		"--metrics-port", strconv.Itoa(metricsPort),
		"--db-filename", filepath.Join(dir, "temporal.db"),
		// SQLite in write-ahead-log mode: in its default rollback-journal mode every transaction
		// creates, writes and deletes a journal file, and a write locks out every reader, so the
		// server's concurrent requests wait on each other. 1,200 workflow starts with 4,800
		// signals, 8 at a time (2026-12-05, two runs each): 56 and 47 CPU-seconds of the server
		// and 4m40s and 1m50s in rollback mode; 20 and 19 CPU-seconds and 42 s and 28 s with
		// the WAL. synchronous=normal keeps every commit across a crash of the server (only a
		// power loss may lose the last ones).
		"--sqlite-pragma", "journal_mode=wal",
		"--sqlite-pragma", "synchronous=normal",
		"--log-level", "warn",
		// Eager activities: the activity a workflow task schedules comes back with that task's
		// completion to the worker that has a slot for it, instead of waiting for a poll (8-85 ms
		// from scheduled to started, per commit, on these machines). docs/operations.md says how
		// to turn it on for a production server.
		"--dynamic-config-value", "system.enableActivityEagerExecution=true",
		// One partition per task queue (the server's default is four): a partition is a queue
		// of its own in the matching service, with its pollers, its forwarding to the root
		// partition and its periodic persistence, work a single-process test server does for
		// no throughput it needs. With GOGC=200 below (the server's heap is small, its
		// collections frequent), a run of two end-to-end test families (2026-12-05, two runs
		// each, alternated) took 21.2 and 22.1 CPU-seconds of the server instead of 25.7 and
		// 25.3, and 3.5% less CPU of the machine. A production cluster is configured apart.
		"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
		"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
	}
	for name, typ := range SearchAttributes {
		args = append(args, "--search-attribute", name+"="+typ)
	}
	logPath := filepath.Join(dir, "temporal.log")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GOGC=200")
	if err := spawn(cmd, logPath); err != nil {
		return Info{}, err
	}
	info := Info{
		Service: ServiceTemporal,
		PID:     cmd.Process.Pid,
		Log:     logPath,
		Addr:    fmt.Sprintf("127.0.0.1:%d", grpcPort),
		URL:     fmt.Sprintf("http://127.0.0.1:%d", uiPort),
		Extra: map[string]string{
			"ui":        fmt.Sprintf("http://127.0.0.1:%d", uiPort),
			"metrics":   fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
			"namespace": "default",
		},
		Started: time.Now().UTC(),
	}
	if err := waitReady(ctx, info, temporalReady); err != nil {
		_ = s.stopInfo(info)
		return Info{}, err
	}
	return info, nil
}

func temporalReady(ctx context.Context, info Info) error {
	c, err := client.DialContext(ctx, client.Options{
		HostPort: info.Addr,
		Logger:   tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	// The search attributes are registered asynchronously at start; wait until they are there.
	resp, err := c.OperatorService().ListSearchAttributes(ctx,
		&operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	if err != nil {
		return err
	}
	for name := range SearchAttributes {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			return fmt.Errorf("search attribute %s not registered yet", name)
		}
	}
	return nil
}
