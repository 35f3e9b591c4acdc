package testenv

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// The crash-point technique of the sinks' atomicity tests: the test binary runs itself again as a
// helper process (RunKilledHelper) that applies a batch through a sink whose test hook kills the
// process (KillSelf) at the point under test, between the data and the position or after both.
// The parent then finds the sink exactly as a crashed worker leaves it, with no process alive,
// and asserts the invariant there before it replays the batch.

// RunKilledHelper runs the current test binary again with only test (a -test.run pattern) and
// env set to params as JSON, and fails t unless the helper process died of SIGKILL (it kills
// itself at its crash point). It returns what the helper printed. HelperParams reads the
// parameters in the helper.
func RunKilledHelper(t testing.TB, test, env string, params any) []byte {
	t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatalf("encoding the helper's parameters: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run="+test, "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the helper was to kill itself at its crash point; it ended with %v, output:\n%s", err, out)
	}
	return out
}

// HelperParams reports whether this process is a helper started by RunKilledHelper with env,
// and if so decodes its parameters into v.
func HelperParams(t testing.TB, env string, v any) bool {
	t.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		return false
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		t.Fatalf("helper parameters %s: %v", env, err)
	}
	return true
}

// KillSelf sends SIGKILL to this process, as a crash would (no deferred calls, no flush, no exit
// status of its own choosing), and blocks until the kernel takes the process away.
func KillSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
