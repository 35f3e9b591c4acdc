package tests

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// TestDockerComposeFile loads docker-compose.yml with compose-go (the library Docker Compose
// itself uses), with every variable of .env.example set, and checks the stack a user gets:
// every service, its image, published ports, health checks and the dependencies that order
// start-up.
func TestDockerComposeFile(t *testing.T) {
	defer parallel(t)()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	env, _ := composeEnv(t, root)
	project, err := loadCompose(root, env)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load with every variable of .env.example set: %v", err)
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

// loadCompose loads the repository's docker-compose.yml the way `docker compose` does, with env
// ("KEY=value") as the only environment (no .env file of the developer's).
func loadCompose(root string, env []string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithConsistency(true), cli.WithResolvedPaths(true),
		cli.WithEnv(env), cli.WithDiscardEnvFile)
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

// composeEnv reads the variables .env.example lists, checks that it gives none a value (a
// password in the example would be a password everyone knows) and returns an environment
// that sets each to a value of its own, with those values.
func composeEnv(t *testing.T, root string) (env, values []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatalf("the compose stack's env file template: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf(".env.example: %q is not KEY=value", line)
		}
		if v != "" {
			t.Errorf(".env.example gives %s the value %q; leave it empty so that every stack sets its own", k, v)
		}
		val := "from-env-" + strings.ToLower(k) + "-7c1e"
		env = append(env, k+"="+val)
		values = append(values, val)
	}
	if len(env) == 0 {
		t.Fatal(".env.example lists no variables")
	}
	return env, values
}

// TestComposeSecretsFromEnv checks that docker-compose.yml has no password of its own: every
// variable of a password, key or secret comes from the environment (.env), the file refuses to
// load while one is missing, naming it, .env.example lists exactly the variables it requires,
// no command or health check spells a password out, and the worker's DSN holds none.
func TestComposeSecretsFromEnv(t *testing.T) {
	defer parallel(t)()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	env, values := composeEnv(t, root)

	t.Run("example lists every required variable", func(t *testing.T) {
		var required []string
		for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+):\?`).FindAllStringSubmatch(string(raw), -1) {
			if !slices.Contains(required, m[1]) {
				required = append(required, m[1])
			}
		}
		var listed []string
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			listed = append(listed, k)
		}
		slices.Sort(required)
		slices.Sort(listed)
		if !slices.Equal(required, listed) {
			t.Errorf("docker-compose.yml requires %v, .env.example lists %v", required, listed)
		}
	})

	t.Run("refused without them", func(t *testing.T) {
		for i, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			rest := slices.Delete(slices.Clone(env), i, i+1)
			_, err := loadCompose(root, rest)
			if err == nil {
				t.Errorf("docker-compose.yml loads without %s", k)
			} else if !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), "set it in .env") {
				t.Errorf("without %s: %v; want the variable and where to set it named", k, err)
			}
		}
	})

	project, err := loadCompose(root, env)
	if err != nil {
		t.Fatal(err)
	}
	secretKey := regexp.MustCompile(`(?i)password|pwd|secret|access_key|token|api_key`)
	// A password spelled out in a command: after a password flag or in user:password.
	inline := regexp.MustCompile(`(?i)(?:password[= ]+|\s-p\s+|\s-u\s+[^\s:]+:)"?([^\s"]+)`)
	for name, svc := range project.Services {
		t.Run(name, func(t *testing.T) {
			for k, v := range svc.Environment {
				if v == nil {
					continue
				}
				if secretKey.MatchString(k) && !slices.Contains(values, *v) {
					t.Errorf("environment %s is %q, not a variable of .env", k, *v)
				}
				if strings.Contains(k, "DSN") && (strings.Contains(*v, "password=") || regexp.MustCompile(`//[^/@:]+:[^/@]+@`).MatchString(*v)) {
					t.Errorf("environment %s holds a password; give it through PGPASSWORD from .env", k)
				}
			}
			var shell []string
			shell = append(shell, svc.Command...)
			shell = append(shell, svc.Entrypoint...)
			if svc.HealthCheck != nil {
				shell = append(shell, svc.HealthCheck.Test...)
			}
			for _, s := range shell {
				for _, m := range inline.FindAllStringSubmatch(" "+s, -1) {
					if !strings.HasPrefix(m[1], "$") {
						t.Errorf("a password is spelled out: %q", strings.TrimSpace(m[0]))
					}
				}
			}
		})
	}

	t.Run("worker health check without a shell", func(t *testing.T) {
		w := project.Services["sluice-worker"]
		want := []string{"CMD", "sluice-worker", "healthcheck", "--metrics-addr"}
		if w.HealthCheck == nil || len(w.HealthCheck.Test) < len(want)+1 || !slices.Equal(w.HealthCheck.Test[:len(want)], want) {
			t.Fatalf("health check %v; want %v ADDR (the image has no shell)", w.HealthCheck, want)
		}
		addr := w.HealthCheck.Test[len(want)]
		i := slices.Index(w.Command, "--metrics-addr")
		if i < 0 || i+1 >= len(w.Command) || w.Command[i+1] != addr {
			t.Errorf("the health check asks %s, but the worker runs %v", addr, w.Command)
		}
	})
}

// TestDockerfile checks the runtime image deploy/Dockerfile describes (no Docker engine runs
// here to build it): a distroless static nonroot base with no shell, a non-root user, a health
// check by the worker's own subcommand, and the same packages `make build` builds, statically.
func TestDockerfile(t *testing.T) {
	defer parallel(t)()
	b, err := os.ReadFile("../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	// Instructions, with continuation lines joined and comments dropped.
	var instr []string
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			instr = append(instr, line)
		}
	}
	last := -1
	for i, in := range instr {
		if strings.HasPrefix(in, "FROM ") {
			last = i
		}
	}
	if last < 0 {
		t.Fatal("no FROM in deploy/Dockerfile")
	}
	runtime := instr[last:]
	if base := strings.Fields(runtime[0])[1]; base != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("runtime base %s; want gcr.io/distroless/static-debian12:nonroot (no shell, non-root)", base)
	}
	var user, health string
	for _, in := range runtime {
		switch {
		case strings.HasPrefix(in, "USER "):
			user = strings.TrimPrefix(in, "USER ")
		case strings.HasPrefix(in, "HEALTHCHECK "):
			health = in
		case strings.HasPrefix(in, "RUN "):
			t.Errorf("the runtime stage runs %q: it has no shell", in)
		}
	}
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Errorf("runtime user %q; want a non-root uid", user)
	}
	if !strings.Contains(health, `CMD ["/usr/local/bin/sluice-worker", "healthcheck"`) {
		t.Errorf("health check %q; want the exec form of sluice-worker healthcheck", health)
	}

	pkgs := func(s string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`(?:go|\$\(GO\)) build [^\n]*?-o \S+/(sluice[-\w]*) (\./\w+)`).FindAllStringSubmatch(s, -1) {
			out = append(out, m[1]+"="+m[2])
		}
		return out
	}
	want := pkgs(string(mk))
	got := pkgs(text)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("the image builds %v, make build builds %v", got, want)
	}
	if n := strings.Count(text, "CGO_ENABLED=0 go build"); n != len(want) {
		t.Errorf("%d of %d builds are static (CGO_ENABLED=0); distroless static has no libc", n, len(want))
	}
}
