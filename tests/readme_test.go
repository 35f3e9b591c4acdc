package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/testkit/devstack"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
	"github.com/sluicecdc/sluice/workflows"
)

// readmePath is the README whose commands the tests below run.
const readmePath = "../README.md"

// readmeSection is the README section whose commands TestREADMECommands runs, with its
// subsections.
const readmeSection = "## Running a pipeline"

// readmePipeline is the pipeline name the README's Temporal CLI commands use; the test replaces
// it with its own in workflow IDs and task queues (sluice/demo/..., sluice-demo).
const readmePipeline = "demo"

var ordersTable = batch.TableName{Schema: "public", Name: "orders"}

var orderColumns = []string{"customer", "amount"}

// TestREADMECommands runs every command of the README's "Running a pipeline" section (its sh
// blocks, those of "Starting with the Temporal CLI" included) as written there, with bash, in
// order, against the local stack, so that the README cannot rot: every command must succeed, and
// the pipeline it starts must copy public.orders into Iceberg. Only what must differ per test
// differs:
//
//   - pipeline.yaml is the test's config, in the test's directory, where every command but make
//     runs; it names a fresh database, the shared Temporal dev server, a local Iceberg warehouse,
//     a pipeline of its own and no task queue (so the default, sluice-<pipeline>, applies).
//   - make runs in the repository root with BINDIR set to the test directory's bin/, where the
//     other commands find bin/sluice and bin/sluice-worker.
//   - the Temporal CLI is the stack's (on PATH), reaching the dev server through TEMPORAL_ADDRESS.
//   - the pipeline name "demo" in workflow IDs and task queues (sluice/demo/, sluice-demo) is the
//     test's pipeline name.
//   - a command ending in & (the worker) runs in the background until the test ends, with
//     --metrics-addr 127.0.0.1:0 appended, since the default port may be taken.
//   - tctl is skipped: the legacy CLI is not installable here.
//
// Between the commands the test waits where a user would look: after a start for the backfill
// and for the sink to equal the source, after resync for the sink again, and before the
// hand-written signal-with-start it terminates the table's workflow, so that the command starts
// a new run, whose input must carry the table's options.
func TestREADMECommands(t *testing.T) {
	defer parallel(t)()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	commands := readmeCommands(t, readmePath, readmeSection)
	p := newIcebergPipeline(t, "", []string{"public.orders:raw.orders"},
		`CREATE TABLE public.orders (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(10,2))`,
		ordersSeed(1, 2000))
	withDefaultTaskQueue(t, p)

	env := append(os.Environ(), p.env...)
	env = append(env,
		"BINDIR="+filepath.Join(p.dir, "bin"),
		"TEMPORAL_ADDRESS="+testenv.Temporal(t),
		"PATH="+filepath.Join(devstack.DefaultCache(), "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	rename := strings.NewReplacer(
		"sluice-"+readmePipeline, "sluice-"+p.name,
		"sluice/"+readmePipeline+"/", "sluice/"+p.name+"/")

	started := func() {
		p.waitStream(ordersTable)
		p.waitEqual("public.orders", "raw.orders", "id", orderColumns)
	}
	hooks := []struct {
		name          string
		prefix        string // of the command
		before, after func()
		ran           bool
	}{
		{name: "sluice start", prefix: "bin/sluice start", after: started},
		{name: "sluice resync", prefix: "bin/sluice resync", after: func() {
			p.exec(ordersSeed(2001, 2100))
			p.waitEqual("public.orders", "raw.orders", "id", orderColumns)
		}},
		{name: "temporal workflow start", prefix: "temporal workflow start", after: func() {
			started()
			p.exec(`UPDATE public.orders SET amount = amount + 1 WHERE id % 7 = 0`, `DELETE FROM public.orders WHERE id BETWEEN 10 AND 19`)
			p.waitEqual("public.orders", "raw.orders", "id", orderColumns)
		}},
		{name: "temporal workflow signal-with-start", prefix: "temporal workflow signal-with-start",
			before: func() {
				// Nothing else may start the table's next run: not the reader either.
				for _, id := range []string{workflows.SourceWorkflowID(p.name), workflows.TableWorkflowID(p.name, ordersTable)} {
					if err := p.temporal.TerminateWorkflow(context.Background(), id, "", "the README's signal-with-start starts a new run"); err != nil {
						t.Fatal(err)
					}
				}
			},
			after: func() { checkTableRunOptions(t, p) },
		},
	}

	for _, c := range commands {
		if strings.HasPrefix(c, "tctl ") {
			t.Logf("skipped (the legacy CLI is not installable): %s", c)
			continue
		}
		c = rename.Replace(c)
		words := strings.Join(strings.Fields(c), " ")
		hook := -1
		for i, h := range hooks {
			if strings.HasPrefix(words, h.prefix) {
				hook = i
			}
		}
		if hook >= 0 && hooks[hook].before != nil {
			hooks[hook].before()
		}
		if bg, ok := strings.CutSuffix(stripComment(c), "&"); ok {
			t.Logf("$ %s (in the background)", c)
			startBackground(t, p.dir, env, strings.TrimSpace(bg)+" --metrics-addr 127.0.0.1:0")
			continue
		}
		dir, timeout := p.dir, 2*time.Minute
		if strings.HasPrefix(c, "make ") {
			dir, timeout = root, 15*time.Minute
		}
		out, err := runShell(dir, env, c, timeout)
		t.Logf("$ %s\n%s", c, out)
		if err != nil {
			t.Fatalf("README command failed: %s\n%v\n%s", c, err, out)
		}
		if hook >= 0 {
			if hooks[hook].after != nil {
				hooks[hook].after()
			}
			hooks[hook].ran = true
		}
	}
	for _, h := range hooks {
		if !h.ran {
			t.Errorf("the README's %q section no longer runs %s (%q...): update this test with it", readmeSection, h.name, h.prefix)
		}
	}
}

// TestREADMEInputExamples checks the JSON inputs the README shows for examples/demo.yaml
// against what `sluice input` prints for it (the SourceWorkflow's, then with --table the
// TableWorkflow's). Keys the README leaves out are those sluice prints as null.
func TestREADMEInputExamples(t *testing.T) {
	defer parallel(t)()
	blocks := readmeBlocks(t, readmePath, readmeSection, "json")
	argss := [][]string{
		{"input", "--config", "../examples/demo.yaml"},
		{"input", "--config", "../examples/demo.yaml", "--table", "public.orders"},
	}
	if len(blocks) != len(argss) {
		t.Fatalf("the README's %q section has %d json blocks, want %d (the SourceWorkflow and TableWorkflow inputs)", readmeSection, len(blocks), len(argss))
	}
	for i, args := range argss {
		out, err := localrun.Sluice(context.Background(), bins.Starter, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		var readme, printed any
		if err := json.Unmarshal([]byte(blocks[i]), &readme); err != nil {
			t.Fatalf("README json block %d: %v\n%s", i+1, err, blocks[i])
		}
		if err := json.Unmarshal([]byte(out), &printed); err != nil {
			t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if !reflect.DeepEqual(dropNulls(readme), dropNulls(printed)) {
			t.Errorf("README json block %d is not what `sluice %s` prints:\nREADME: %s\nsluice: %s", i+1, strings.Join(args, " "), blocks[i], out)
		}
	}
}

// ordersSeed inserts orders from..to.
func ordersSeed(from, to int) string {
	return fmt.Sprintf(`INSERT INTO public.orders (id, customer, amount)
		SELECT g, 'customer-' || (g %% 100), (g %% 1000) / 10.0 FROM generate_series(%d, %d) g`, from, to)
}

// withDefaultTaskQueue removes temporal.task_queue from p's config, so the default applies.
func withDefaultTaskQueue(t *testing.T, p *icebergPipeline) {
	t.Helper()
	data, err := os.ReadFile(p.config)
	if err != nil {
		t.Fatal(err)
	}
	line := "  task_queue: sluice-" + p.name + "\n"
	if !strings.Contains(string(data), line) {
		t.Fatalf("the test config has no line %q:\n%s", line, data)
	}
	if err := os.WriteFile(p.config, []byte(strings.Replace(string(data), line, "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkTableRunOptions checks that the table's running workflow was started with the options
// the starter sends (an Iceberg table's maintenance interval among them), and streams.
func checkTableRunOptions(t *testing.T, p *icebergPipeline) {
	t.Helper()
	ctx := context.Background()
	id := workflows.TableWorkflowID(p.name, ordersTable)
	iter := p.temporal.GetWorkflowHistory(ctx, id, "", false, 0)
	if !iter.HasNext() {
		t.Fatalf("workflow %s has no history", id)
	}
	first, err := iter.Next()
	if err != nil {
		t.Fatal(err)
	}
	payloads := first.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(payloads) != 1 {
		t.Fatalf("workflow %s started with %d inputs, want 1", id, len(payloads))
	}
	var in workflows.TableInput
	if err := json.Unmarshal(payloads[0].GetData(), &in); err != nil {
		t.Fatalf("input of workflow %s: %v", id, err)
	}
	if want := pipeline.TableOptions(p.cfg); in.Options != want {
		t.Errorf("the README's signal-with-start started %s with options %+v, want %+v (what the starter sends)", id, in.Options, want)
	}
	p.waitStream(ordersTable)
}

// readmeBlocks returns the fenced code blocks of language lang in the README section that
// heading opens, up to the next heading of its level or higher.
func readmeBlocks(t *testing.T, path, heading, lang string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	level := strings.Index(heading, " ")
	var blocks []string
	var block *strings.Builder
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case block != nil && strings.HasPrefix(line, "```"):
			blocks = append(blocks, block.String())
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		case line == heading:
			in = true
		case in && strings.HasPrefix(line, "#"):
			if l := strings.Index(line, " "); l > 0 && l <= level && strings.Trim(line[:l], "#") == "" {
				in = false
			}
		case in && line == "```"+lang:
			block = &strings.Builder{}
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s: no %s blocks in section %q", path, lang, heading)
	}
	return blocks
}

// readmeCommands returns the commands of the sh blocks of a README section, one per line, lines
// ending in a backslash joined with the next.
func readmeCommands(t *testing.T, path, heading string) []string {
	t.Helper()
	var cmds []string
	for _, b := range readmeBlocks(t, path, heading, "sh") {
		var cur string
		for _, line := range strings.Split(b, "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			if c, ok := strings.CutSuffix(line, `\`); ok {
				cur += c
				continue
			}
			cmds = append(cmds, strings.TrimSpace(cur+line))
			cur = ""
		}
	}
	return cmds
}

// stripComment removes a trailing shell comment (" # ...") outside quotes.
func stripComment(cmd string) string {
	var quote rune
	for i, r := range cmd {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && i > 0 && cmd[i-1] == ' ':
			return strings.TrimSpace(cmd[:i])
		}
	}
	return strings.TrimSpace(cmd)
}

// runShell runs cmd with bash in dir and returns its output.
func runShell(dir string, env []string, cmd string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", cmd)
	c.Dir, c.Env = dir, env
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	out, err := c.CombinedOutput()
	return string(out), err
}

// startBackground runs cmd with bash in dir until the test ends (SIGTERM, then SIGKILL to its
// process group), its output logged when the test fails.
func startBackground(t *testing.T, dir string, env []string, cmd string) {
	t.Helper()
	logPath := filepath.Join(dir, fmt.Sprintf("background-%d.log", time.Now().UnixNano()))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("bash", "-c", "exec "+cmd)
	c.Dir, c.Env = dir, env
	c.Stdout, c.Stderr = logf, logf
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting %s: %v", cmd, err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = c.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("%s (last 4 KiB):\n%s", cmd, tailBytes(b, 4096))
			}
		}
	})
	// A command that fails at once (a misspelt flag) fails the test here, not after a timeout.
	select {
	case <-exited:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("README command %s & exited at once: %v\n%s", cmd, waitErr, b)
	case <-time.After(2 * time.Second):
	}
}

// dropNulls returns v without the object keys whose value is null.
func dropNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if e != nil {
				out[k] = dropNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = dropNulls(e)
		}
		return out
	}
	return v
}
