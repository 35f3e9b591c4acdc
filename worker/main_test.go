package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/internal/version"
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

// TestNameBinarySparesTheSDKHashingTheExecutable checks that after nameBinary the SDK's binary
// checksum is the build ID: its start then skips reading and hashing the executable (left unset,
// the checksum is the md5 of the test binary, which is what a worker start computed).
func TestNameBinarySparesTheSDKHashingTheExecutable(t *testing.T) {
	id := version.Get().BuildID()
	nameBinary(id)
	if got := (&workflow.Info{}).GetBinaryChecksum(); got != id {
		t.Fatalf("the SDK's binary checksum is %q, want the build ID %q (it hashed the executable)", got, id)
	}
}
