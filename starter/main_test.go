package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/workflows"
)

// execute runs the starter's root command with args and returns its output.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestCommandsWithoutConfig checks which commands need --config: every pipeline command does,
// completion, help and --version do not.
func TestCommandsWithoutConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		wantOut string // a substring of the output; empty: the command must fail for lack of --config
	}{
		{[]string{"completion", "bash"}, "bash completion"},
		{[]string{"completion", "zsh"}, "zsh completion"},
		{[]string{"--version"}, "sluice version "},
		{[]string{"help"}, "Available Commands"},
		{[]string{"check"}, ""},
		{[]string{"input"}, ""},
		{[]string{"start"}, ""},
		{[]string{"status"}, ""},
		{[]string{"pause"}, ""},
		{[]string{"resume"}, ""},
		{[]string{"resync", "--table", "public.orders"}, ""},
		{[]string{"stop"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			out, err := execute(t, tc.args...)
			if tc.wantOut == "" {
				if err == nil || !strings.Contains(err.Error(), `"config" not set`) {
					t.Fatalf("sluice %s without --config: error %v, want one saying --config is required", strings.Join(tc.args, " "), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("sluice %s: %v\n%s", strings.Join(tc.args, " "), err, out)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Fatalf("sluice %s printed %q, want it to contain %q", strings.Join(tc.args, " "), out, tc.wantOut)
			}
		})
	}
}

// TestInput checks the inputs `sluice input` prints for the Temporal CLI: the SourceWorkflow's,
// with max_wait as the config writes it, and with --table the TableWorkflow's with its options.
func TestInput(t *testing.T) {
	t.Parallel()
	out, err := execute(t, "input", "--config", "../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"max_wait":"1s"`) {
		t.Errorf("sluice input: max_wait not written as \"1s\":\n%s", out)
	}
	var src workflows.SourceInput
	if err := json.Unmarshal([]byte(out), &src); err != nil || src.Pipeline != "demo" || src.Slot != "sluice_demo" || len(src.Tables) != 0 {
		t.Errorf("sluice input printed %s (%v), want the demo's SourceWorkflow input (names and limits, no tables: the workers' config holds them)", out, err)
	}

	out, err = execute(t, "input", "--config", "../examples/demo.yaml", "--table", "public.orders")
	if err != nil {
		t.Fatal(err)
	}
	var tbl workflows.TableInput
	if err := json.Unmarshal([]byte(out), &tbl); err != nil {
		t.Fatalf("sluice input --table printed %s: %v", out, err)
	}
	if tbl.Table().String() != "public.orders" || tbl.Options.MaintainEveryCommits != 100 || tbl.Options.SnapshotChunkRows != 50000 {
		t.Errorf("sluice input --table printed %s, want public.orders with its options (maintain every 100 commits, chunks of 50000 rows)", out)
	}

	if _, err := execute(t, "input", "--config", "../examples/demo.yaml", "--table", "public.nope"); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("sluice input --table public.nope: error %v, want no such table", err)
	}
}
