package tests

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// TestDockerComposeFile loads docker-compose.yml with compose-go (the library Docker Compose
// itself uses) and checks the stack a user gets: every service, its image, published ports,
// health checks and the dependencies that order start-up.
func TestDockerComposeFile(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithConsistency(true), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}

	tests := []struct {
		service     string
		image       string
		ports       []uint32 // published ports users connect to
		healthcheck bool
		dependsOn   map[string]string // service -> condition
	}{
		{service: "postgres", image: "postgres:16", ports: []uint32{5432}, healthcheck: true},
		{service: "temporal", image: "temporalio/auto-setup:1.29.1", ports: []uint32{7233}, healthcheck: true,
			dependsOn: map[string]string{"postgres": types.ServiceConditionHealthy}},
		{service: "temporal-ui", image: "temporalio/ui:2.42.1", ports: []uint32{8080}, healthcheck: true,
			dependsOn: map[string]string{"temporal": types.ServiceConditionHealthy}},
		{service: "clickhouse", image: "clickhouse/clickhouse-server:25.8", ports: []uint32{8123, 9000}, healthcheck: true},
		{service: "couchbase", image: "couchbase/server:community-7.6.2", ports: []uint32{8091, 11210}, healthcheck: true},
		{service: "s3", image: "versity/versitygw:v1.8.0", ports: []uint32{7070}, healthcheck: true},
		{service: "iceberg-rest", image: "apache/iceberg-rest-fixture:1.9.2", ports: []uint32{8181}, healthcheck: true,
			dependsOn: map[string]string{"s3-setup": types.ServiceConditionCompletedSuccessfully}},
		{service: "weed", image: "chrislusf/seaweedfs:4.53", ports: []uint32{8333, 8181}, healthcheck: true},
		{service: "sluice-worker", image: "sluicecdc/sluice:dev", ports: []uint32{9464}, healthcheck: true,
			dependsOn: map[string]string{
				"postgres":       types.ServiceConditionHealthy,
				"temporal":       types.ServiceConditionHealthy,
				"temporal-setup": types.ServiceConditionCompletedSuccessfully,
				"clickhouse":     types.ServiceConditionHealthy,
				"couchbase":      types.ServiceConditionHealthy,
				"weed":           types.ServiceConditionHealthy,
			}},
	}
	for _, tc := range tests {
		t.Run(tc.service, func(t *testing.T) {
			svc, ok := project.Services[tc.service]
			if !ok {
				t.Fatalf("service %s is missing", tc.service)
			}
			if svc.Image != tc.image {
				t.Errorf("image %q, want %q", svc.Image, tc.image)
			}
			published := map[uint32]bool{}
			for _, p := range svc.Ports {
				published[p.Target] = p.Published != ""
				if p.HostIP != "127.0.0.1" {
					t.Errorf("port %d is published on %q; bind it to 127.0.0.1 (a local stack with local passwords)", p.Target, p.HostIP)
				}
			}
			for _, port := range tc.ports {
				if !published[port] {
					t.Errorf("port %d is not published (ports %+v)", port, svc.Ports)
				}
			}
			if tc.healthcheck && (svc.HealthCheck == nil || len(svc.HealthCheck.Test) == 0) {
				t.Errorf("no health check")
			}
			for dep, cond := range tc.dependsOn {
				got, ok := svc.DependsOn[dep]
				if !ok {
					t.Errorf("does not depend on %s", dep)
				} else if got.Condition != cond {
					t.Errorf("depends on %s with condition %q, want %q", dep, got.Condition, cond)
				}
			}
		})
	}

	t.Run("worker build", func(t *testing.T) {
		w := project.Services["sluice-worker"]
		if w.Build == nil {
			t.Fatal("sluice-worker has no build section")
		}
		if _, err := os.Stat(filepath.Join(w.Build.Context, w.Build.Dockerfile)); err != nil {
			t.Fatalf("worker Dockerfile: %v", err)
		}
		for _, v := range w.Volumes {
			if v.Type == types.VolumeTypeBind {
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("bind mount source %s: %v", v.Source, err)
				}
			}
		}
	})
}
