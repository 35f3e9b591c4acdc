package devstack

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestGocavesConnstr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, log, want string
		wantErr         bool
	}{
		{name: "printed", log: "starting\n{\"connstr\":\"couchbase://127.0.0.1:1234,127.0.0.1:1235\"}\nPACKET ...\n",
			want: "couchbase://127.0.0.1:1234,127.0.0.1:1235"},
		{name: "prefixed by a timestamp", log: `2026/11/30 {"connstr":"couchbase://127.0.0.1:9"}` + "\n", want: "couchbase://127.0.0.1:9"},
		{name: "not yet", log: "starting\n", wantErr: true},
		{name: "empty value", log: `{"connstr":""}` + "\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "gocaves.log")
			if err := os.WriteFile(p, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := gocavesConnstr(p)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("got %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestMissingToolSaysHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	s, err := New(t.TempDir(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Ensure(context.Background(), ServiceTemporal)
	if err == nil || !strings.Contains(err.Error(), "temporal is not installed") || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("got %v, want an error naming the tool and `make tools`", err)
	}
	if _, err := s.Ensure(context.Background(), "mysql"); err == nil || !strings.Contains(err.Error(), "unknown service") {
		t.Fatalf("got %v, want unknown service", err)
	}
}

// TestEnsureIsIdempotentAndStopStopsByPID starts a private PostgreSQL in its own stack
// directory, checks that a second Ensure reuses it, and that Stop ends the recorded process.
func TestEnsureIsIdempotentAndStopStopsByPID(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := New(filepath.Join(t.TempDir(), "stack"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	first, err := s.Ensure(ctx, ServicePostgres)
	if err != nil {
		t.Fatal(err)
	}
	if err := postgresReady(ctx, first); err != nil {
		t.Fatalf("started server not ready: %v", err)
	}
	second, err := s.Ensure(ctx, ServicePostgres)
	if err != nil {
		t.Fatal(err)
	}
	if second.PID != first.PID || second.Addr != first.Addr {
		t.Fatalf("second Ensure started another server: %+v then %+v", first, second)
	}
	if up := s.Status()[ServicePostgres]; !up {
		t.Fatal("status does not show postgres running")
	}
	// Halt takes the server away; the next Ensure brings it back on the same address and data.
	conn, err := pgx.Connect(ctx, first.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (id int)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := s.Halt(ctx, ServicePostgres); err != nil {
		t.Fatal(err)
	}
	if alive(first.PID) {
		t.Fatalf("pid %d alive after Halt", first.PID)
	}
	back, err := s.Ensure(ctx, ServicePostgres)
	if err != nil {
		t.Fatal(err)
	}
	if back.Addr != first.Addr || back.PID == first.PID {
		t.Fatalf("after Halt, Ensure gave %+v; want the same address %s and a new process", back, first.Addr)
	}
	conn, err = pgx.Connect(ctx, back.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT * FROM kept"); err != nil {
		t.Fatalf("data lost across Halt: %v", err)
	}
	conn.Close(ctx)
	if _, err := os.Stat(filepath.Join(s.Dir, EventsFile)); !os.IsNotExist(err) {
		t.Fatalf("a restart after Halt was recorded as unexpected (%s: %v)", EventsFile, err)
	}
	first = back
	if err := s.Stop(ctx, ServicePostgres); err != nil {
		t.Fatal(err)
	}
	if alive(first.PID) {
		t.Fatalf("pid %d still alive after Stop", first.PID)
	}
	if _, err := s.Info(ServicePostgres); !os.IsNotExist(err) {
		t.Fatalf("state file left after Stop: %v", err)
	}
}

// TestCouchbaseBehindLogCapperStartsAndStops starts gocaves (behind the shell that caps its log) in a stack of its own: it answers
// (Ensure waits for a bucket), its log keeps the connection string, and Stop leaves no process of
// its group (the shell, gocaves and the log capper) behind.
func TestCouchbaseBehindLogCapperStartsAndStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := New(filepath.Join(t.TempDir(), "stack"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	info, err := s.Ensure(ctx, ServiceCouchbase)
	if err != nil {
		t.Fatal(err)
	}
	if connstr, err := gocavesConnstr(info.Log); err != nil || connstr != info.URL {
		t.Fatalf("log gives connstr %q (%v), want %q", connstr, err, info.URL)
	}
	// gocaves dies (as a crash would): the next Ensure starts another and records why, with the
	// end of the dead one's log, in the stack's events file.
	mock := childNamed(t, info.PID, "gocaves")
	if err := syscall.Kill(mock, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for alive(info.PID) {
		if ctx.Err() != nil {
			t.Fatalf("the log capper's shell %d outlived gocaves", info.PID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	again, err := s.Ensure(ctx, ServiceCouchbase)
	if err != nil {
		t.Fatal(err)
	}
	events, err := os.ReadFile(filepath.Join(s.Dir, EventsFile))
	if err != nil {
		t.Fatalf("no record of the restart: %v", err)
	}
	if want := fmt.Sprintf("couchbase (pid %d", info.PID); !strings.Contains(string(events), want) || !strings.Contains(string(events), "exited") {
		t.Fatalf("%s says %q, want a line with %q saying it exited", EventsFile, events, want)
	}
	info = again
	if err := s.Stop(ctx, ServiceCouchbase); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for syscall.Kill(-info.PID, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has processes 20 s after Stop", info.PID)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWeedRequiresCredentialsAndRestartsInPlace starts weed in a stack of its own: its S3 gateway
// and catalog refuse anonymous requests, a halted weed comes back on the same addresses with its
// buckets (Ensure's readiness lists the table bucket's namespaces with a token), and Stop leaves
// no process behind.
func TestWeedRequiresCredentialsAndRestartsInPlace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := New(filepath.Join(t.TempDir(), "stack"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	info, err := s.Ensure(ctx, ServiceWeed)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{info.Extra["s3_endpoint"] + "/" + WeedBucket, info.URL + "/v1/" + WeedTableBucket + "/namespaces"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// weed hides a table bucket from an anonymous caller as not found (404).
		if resp.StatusCode < 400 {
			t.Errorf("anonymous GET %s: %s, want a refusal", u, resp.Status)
		}
	}
	if _, err := WeedToken(ctx, info.URL, WeedAccessKey, "wrong"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a token for a wrong secret: %v, want 401", err)
	}

	if err := s.Halt(ctx, ServiceWeed); err != nil {
		t.Fatal(err)
	}
	back, err := s.Ensure(ctx, ServiceWeed)
	if err != nil {
		t.Fatal(err)
	}
	if back.PID == info.PID || back.URL != info.URL || back.Extra["s3_endpoint"] != info.Extra["s3_endpoint"] {
		t.Errorf("after a halt weed is pid %d at %s and %s; was pid %d at %s and %s",
			back.PID, back.URL, back.Extra["s3_endpoint"], info.PID, info.URL, info.Extra["s3_endpoint"])
	}
	if err := s.Stop(ctx, ServiceWeed); err != nil {
		t.Fatal(err)
	}
	if alive(back.PID) {
		t.Fatalf("weed (pid %d) still runs after Stop", back.PID)
	}
}

// childNamed returns the pid of the process below parent (descendants) whose command name is comm.
func childNamed(t *testing.T, parent int, comm string) int {
	t.Helper()
	for _, pid := range descendants(parent) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == comm {
			return pid
		}
	}
	t.Fatalf("no %s process under pid %d", comm, parent)
	return 0
}
