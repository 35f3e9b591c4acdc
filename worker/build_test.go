package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/internal/faults"
)

// faultsPkg is the import path of the fault points, as the linker names its symbols.
const faultsPkg = "github.com/sluicecdc/sluice/internal/faults."

// TestProductionBuild builds the worker as it ships (no build tags: make build, the Docker
// image) and as the end-to-end tests build it (-tags faults), and checks that the shipped one
// holds no fault point and ignores SLUICE_FAULTS. The test build is the control: the same checks
// must find its fault points and see it armed, so they cannot pass by looking in the wrong place.
// It runs the same with or without -tags faults on go test: it builds both binaries itself.
func TestProductionBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the worker twice")
	}
	t.Parallel()
	dir := t.TempDir()
	builds := []struct {
		name  string
		bin   string
		armed bool // built with the faults tag
	}{
		{"shipped", buildWorker(t, filepath.Join(dir, "sluice-worker")), false},
		{"tests' build (control)", buildWorker(t, filepath.Join(dir, "sluice-worker-faults"), "-tags", "faults"), true},
	}
	points := pointNames(t)
	for _, b := range builds {
		t.Run(b.name+"/fault points", func(t *testing.T) {
			t.Parallel()
			found := faultPointsIn(t, b.bin, points)
			if !b.armed && len(found) > 0 {
				t.Errorf("the worker built without tags holds fault points:\n  %s", strings.Join(found, "\n  "))
			}
			if b.armed && len(found) == 0 {
				t.Errorf("the worker built with -tags faults shows no fault point: the checks look in the wrong place")
			}
		})
		t.Run(b.name+"/SLUICE_FAULTS", func(t *testing.T) {
			t.Parallel()
			for _, c := range []struct {
				spec      string
				armed     string // output of the build with the faults tag
				unarmable string // output of the build without
			}{
				{string(faults.CommitAckBeforeWrite) + ":kill", "TESTING FAULTS ARMED", faults.EnvVar + " is ignored"},
				{"no.such-point:kill", `unknown point "no.such-point"`, faults.EnvVar + " is ignored"},
			} {
				out := startWithFaults(t, b.bin, c.spec)
				want, not := c.unarmable, c.armed
				if b.armed {
					want, not = c.armed, c.unarmable
				}
				if !strings.Contains(out, want) || strings.Contains(out, not) {
					t.Errorf("%s=%s: output does not say %q (or says %q):\n%s", faults.EnvVar, c.spec, want, not, out)
				}
			}
		})
	}
}

// buildWorker builds this package into out with the extra go build flags; GOFLAGS is cleared so
// that a -tags of the environment does not leak into the shipped build.
func buildWorker(t *testing.T, out string, flags ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, flags...), "-o", out, ".")...)
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(flags, " "), err, msg)
	}
	return out
}

// pointNames are the names of every Point constant in internal/faults/points.go, which both
// builds compile (the call sites name them).
func pointNames(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "internal", "faults", "points.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*\w+\s+Point\s*=\s*"([^"]+)"`).FindAllSubmatch(src, -1) {
		names = append(names, string(m[1]))
	}
	if len(names) < 4 {
		t.Fatalf("found %d point constants in points.go (%q); the pattern no longer matches", len(names), names)
	}
	return names
}

// faultPointsIn lists the traces of fault points in the binary bin: symbols of internal/faults
// other than the empty methods of Points that the untagged build keeps for reflection (arming,
// parsing, killing), calls into internal/faults from outside it (a hook site the compiler did
// not remove), and the point names and fault messages among its strings.
func faultPointsIn(t *testing.T, bin string, points []string) []string {
	t.Helper()
	var found []string
	noOps := map[string]bool{"(*Points).String": true, "(*Points).Fires": true, "(*Points).Crash": true, "(*Points).Hit": true}
	for _, line := range strings.Split(goTool(t, "nm", bin), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		name := strings.Join(fields[2:], " ")
		if rest, ok := strings.CutPrefix(name, faultsPkg); ok && !noOps[rest] {
			found = append(found, "symbol "+name)
		}
	}
	// objdump prints "TEXT symbol(SB) file" before each function's instructions.
	fn := ""
	sc := bufio.NewScanner(strings.NewReader(goTool(t, "objdump", "-s", `^(main\.|github\.com/sluicecdc/sluice/)`, bin)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "TEXT "); ok {
			fn, _, _ = strings.Cut(rest, "(SB)")
			continue
		}
		if i := strings.Index(line, "CALL "+faultsPkg); i >= 0 && !strings.HasPrefix(fn, faultsPkg) {
			found = append(found, "call from "+fn+" to "+strings.Fields(line[i+len("CALL "):])[0])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	// points is shared by the parallel subtests: append to a copy, never into its backing array.
	for _, s := range slices.Concat(points, []string{"fault injected", "TESTING FAULTS ARMED"}) {
		if bytes.Contains(data, []byte(s)) {
			found = append(found, "string "+s)
		}
	}
	return found
}

func goTool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"tool"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go tool %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// startWithFaults runs the worker bin with SLUICE_FAULTS=spec and a config file that does not
// exist, and returns its output: the worker reads SLUICE_FAULTS before its config, so it arms
// (or refuses, or ignores) the faults and then stops at the missing config without a service.
func startWithFaults(t *testing.T, bin, spec string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config", filepath.Join(t.TempDir(), "missing.yaml"), "--metrics-addr", "")
	cmd.Env = append(os.Environ(), faults.EnvVar+"="+spec)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the worker ran without a config:\n%s", out)
	}
	return string(out)
}
