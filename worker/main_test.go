package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestVersion checks that --version prints the version and needs no --config.
func TestVersion(t *testing.T) {
	t.Parallel()
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "sluice-worker version ") || !strings.Contains(out.String(), "commit ") {
		t.Errorf("sluice-worker --version printed %q, want its version and commit", out.String())
	}
}
