package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Service names accepted by Start and Stop.
const (
	ServicePostgres   = "postgres"
	ServiceTemporal   = "temporal"
	ServiceClickHouse = "clickhouse"
	ServiceCouchbase  = "couchbase"
	ServiceWeed       = "weed" // SeaweedFS: S3 and an Iceberg REST catalog
)

// Services lists every managed service in start order.
var Services = []string{ServicePostgres, ServiceTemporal, ServiceClickHouse, ServiceCouchbase, ServiceWeed}

// readyTimeout bounds how long a service may take to become ready after it is started.
const readyTimeout = 90 * time.Second

// Stack is one work directory of services. It holds no running state of its own: everything
// lives in the directory, so any process can use or stop a stack another process started.
type Stack struct {
	Dir    string // work directory: data, logs and state files of every service
	Cache  string // tool cache outside the clone (built binaries)
	Logger *slog.Logger
	// PostgresSettings are server settings ("name=value") applied after the stack's own, so
	// they override them: a private stack's server configured as a test needs it.
	PostgresSettings []string
	// StopWait is how long Stop lets a service shut down before it kills the service's whole
	// process tree; 0 means 20 seconds.
	StopWait time.Duration
	// WeedVending makes weed's Iceberg REST catalog vend table-scoped S3 credentials (STS
	// sessions) to clients that ask for them; the shared stack's weed does not, so its clients
	// use their configured keys.
	WeedVending bool
}

// Info is what a started service exposes, as recorded in its state file.
type Info struct {
	Service string            `json:"service"`
	PID     int               `json:"pid"`
	Log     string            `json:"log"`
	Addr    string            `json:"addr"`          // host:port of the main endpoint
	URL     string            `json:"url,omitempty"` // a DSN or connection string, when the service has one
	Extra   map[string]string `json:"extra,omitempty"`
	Started time.Time         `json:"started"`
	// Halted is set by Halt: the service was stopped on purpose and keeps its ports for Ensure.
	Halted bool `json:"halted,omitempty"`
}

// New returns the stack in dir with tools from cache. Empty arguments take the defaults:
// $SLUICE_STACK_DIR or <module root>/.stack, and $SLUICE_CACHE or ~/.cache/sluice.
func New(dir, cache string, logger *slog.Logger) (*Stack, error) {
	var err error
	if dir == "" {
		dir, err = DefaultDir()
		if err != nil {
			return nil, err
		}
	}
	if cache == "" {
		cache = DefaultCache()
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving stack directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating stack directory %s: %w", dir, err)
	}
	return &Stack{Dir: dir, Cache: cache, Logger: logger.With("module", "devstack")}, nil
}

// DefaultDir is $SLUICE_STACK_DIR, or .stack in the root of the Sluice module that contains the
// current directory.
func DefaultDir() (string, error) {
	if d := os.Getenv("SLUICE_STACK_DIR"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the stack directory: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/sluicecdc/sluice\n") {
			return filepath.Join(d, ".stack"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("finding the stack directory: %s is not inside the Sluice module; set SLUICE_STACK_DIR", wd)
		}
	}
}

// DefaultCache is $SLUICE_CACHE or ~/.cache/sluice, where scripts/install-tools.sh puts binaries.
func DefaultCache() string {
	if c := os.Getenv("SLUICE_CACHE"); c != "" {
		return c
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "sluice")
}

// EnsureEach ensures each of services (Ensure), in order, and returns their Infos in that order.
func (s *Stack) EnsureEach(ctx context.Context, services ...string) ([]Info, error) {
	infos := make([]Info, len(services))
	for i, name := range services {
		info, err := s.Ensure(ctx, name)
		if err != nil {
			return nil, err
		}
		infos[i] = info
	}
	return infos, nil
}

// Ensure starts the named service unless it is already running and ready, and returns its info.
// It is safe to call from several processes at once.
func (s *Stack) Ensure(ctx context.Context, service string) (Info, error) {
	starter, ok := s.starters()[service]
	if !ok {
		return Info{}, fmt.Errorf("unknown service %q (want one of %s)", service, strings.Join(Services, ", "))
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return Info{}, err
	}
	defer unlock()

	if info, err := s.readState(service); err == nil && alive(info.PID) {
		// Other processes may be using it (make test's packages share one stack): a restart
		// moves it to new ports under them, so one slow answer on a loaded machine is not
		// enough; it is restarted only after liveReadyWait of failed checks.
		rctx, cancel := context.WithTimeout(ctx, liveReadyWait)
		err := waitReady(rctx, info, s.ready)
		cancel()
		if err == nil {
			return info, nil
		}
		s.recordRestart(info, fmt.Sprintf("running but not ready after %s (%v); restarting it", liveReadyWait, err))
		_ = s.stopInfo(info)
	} else if err == nil && !info.Halted {
		s.recordRestart(info, "exited; starting it again")
	}
	info, err := starter(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("starting %s: %w", service, err)
	}
	if err := s.writeState(info); err != nil {
		return Info{}, err
	}
	return info, nil
}

// Status returns the info of every service recorded as started, with whether it is alive.
func (s *Stack) Status() map[string]bool {
	out := map[string]bool{}
	for _, svc := range Services {
		if info, err := s.readState(svc); err == nil {
			out[svc] = alive(info.PID)
		}
	}
	return out
}

// Info returns the recorded info of a started service.
func (s *Stack) Info(service string) (Info, error) { return s.readState(service) }

// Stop stops the named services (all when none are named) by the pids it recorded.
func (s *Stack) Stop(ctx context.Context, services ...string) error {
	if len(services) == 0 {
		services = append([]string(nil), Services...)
		sort.Sort(sort.Reverse(sort.StringSlice(services)))
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	for _, svc := range services {
		info, err := s.readState(svc)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := s.stopInfo(info); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s (pid %d): %w", svc, info.PID, err))
			continue
		}
		_ = os.Remove(s.statePath(svc))
	}
	return errors.Join(errs...)
}

// Halt stops a service by its pid but keeps its state, so the next Ensure starts it again on the
// same ports with the same data: what a test needs to take a service away for a while.
func (s *Stack) Halt(ctx context.Context, service string) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	info, err := s.readState(service)
	if err != nil {
		return fmt.Errorf("halting %s: %w", service, err)
	}
	if err := s.stopInfo(info); err != nil {
		return fmt.Errorf("halting %s (pid %d): %w", service, info.PID, err)
	}
	info.Halted = true
	return s.writeState(info)
}

// EventsFile is the file in a stack's directory where Ensure records each restart of a service
// it did not stop itself (one that exited, or stopped answering), with the end of its log: a
// shared stack's services are restarted under the processes using them, and the reason must
// outlive the restart.
const EventsFile = "events.log"

// recordRestart logs and appends to EventsFile that info's service is restarted, and why.
func (s *Stack) recordRestart(info Info, why string) {
	s.Logger.Warn("restarting a service", "service", info.Service, "pid", info.PID, "why", why, "log", info.Log)
	end := info.Log + ".end" // the end of a capped log (gocaves), written when the service exits
	if st, err := os.Stat(end); err != nil || st.Size() == 0 {
		end = info.Log
	}
	entry := fmt.Sprintf("%s %s (pid %d, started %s) %s; the end of %s:\n%s\n\n",
		time.Now().UTC().Format(time.RFC3339), info.Service, info.PID, info.Started.Format(time.RFC3339), why, end, tail(end, 30))
	f, err := os.OpenFile(filepath.Join(s.Dir, EventsFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		s.Logger.Warn("recording a restart", "err", err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(entry); err != nil {
		s.Logger.Warn("recording a restart", "err", err)
	}
}

// previousPort is the port a service last listened on, when it is free again; 0 otherwise.
func (s *Stack) previousPort(service string) int {
	info, err := s.readState(service)
	if err != nil || alive(info.PID) {
		return 0
	}
	_, port, err := net.SplitHostPort(info.Addr)
	if err != nil {
		return 0
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return 0
	}
	_ = l.Close()
	n, _ := strconv.Atoi(port)
	return n
}

func (s *Stack) starters() map[string]func(context.Context) (Info, error) {
	return map[string]func(context.Context) (Info, error){
		ServicePostgres:   s.startPostgres,
		ServiceTemporal:   s.startTemporal,
		ServiceClickHouse: s.startClickHouse,
		ServiceCouchbase:  s.startCouchbase,
		ServiceWeed:       s.startWeed,
	}
}

func (s *Stack) ready(ctx context.Context, info Info) error {
	switch info.Service {
	case ServicePostgres:
		return postgresReady(ctx, info)
	case ServiceTemporal:
		return temporalReady(ctx, info)
	case ServiceClickHouse:
		return clickhouseReady(ctx, info)
	case ServiceCouchbase:
		return couchbaseReady(ctx, info)
	case ServiceWeed:
		return weedReady(ctx, info)
	}
	return fmt.Errorf("unknown service %q", info.Service)
}

func (s *Stack) stopInfo(info Info) error {
	sig := syscall.SIGTERM
	if info.Service == ServicePostgres {
		sig = syscall.SIGINT // fast shutdown: do not wait for clients to disconnect
	}
	if !alive(info.PID) {
		return nil
	}
	// gocaves runs under a shell that caps its log (startCouchbase): signal the whole group,
	// which spawn made the service's own (Setsid).
	target := info.PID
	if info.Service == ServiceCouchbase {
		target = -info.PID
	}
	if err := syscall.Kill(target, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	deadline := time.Now().Add(s.stopWait())
	for time.Now().Before(deadline) {
		if !alive(info.PID) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Too slow (Postgres' fast shutdown waits for walsenders): kill the whole tree, found before
	// the kill, so that no child (a walsender, the checkpointer) outlives it holding the
	// service's shared memory or port.
	if left := killTree(info.PID, descendants(info.PID), 10*time.Second); len(left) > 0 {
		return fmt.Errorf("stopping %s: processes %v survived SIGKILL", info.Service, left)
	}
	return nil
}

// stopWait is how long a service may take to stop after its signal before it is killed.
func (s *Stack) stopWait() time.Duration {
	if s.StopWait > 0 {
		return s.StopWait
	}
	return 20 * time.Second
}

func (s *Stack) serviceDir(service string) string { return filepath.Join(s.Dir, service) }

func (s *Stack) statePath(service string) string {
	return filepath.Join(s.serviceDir(service), "state.json")
}

func (s *Stack) readState(service string) (Info, error) {
	b, err := os.ReadFile(s.statePath(service))
	if err != nil {
		return Info{}, err
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return Info{}, fmt.Errorf("reading state of %s: %w", service, err)
	}
	return info, nil
}

func (s *Stack) writeState(info Info) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.statePath(info.Service) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing state of %s: %w", info.Service, err)
	}
	return os.Rename(tmp, s.statePath(info.Service))
}

// lock takes an exclusive lock on the stack directory, waiting for other processes.
func (s *Stack) lock(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening stack lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking stack directory: %w", err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the stack lock (another process is starting services): %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// spawn starts a detached process (its own session, so it outlives the caller) with stdout and
// stderr appended to logPath.
func spawn(cmd *exec.Cmd, logPath string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening log %s: %w", logPath, err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr, cmd.Stdin = logf, logf, nil
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running %s: %w", cmd.Path, err)
	}
	// Reap the child when it exits so that a dead service does not linger as a zombie that
	// still answers kill(pid, 0) while this process lives.
	go func() { _ = cmd.Wait() }()
	return nil
}

// liveReadyWait is how long Ensure waits for a running service to answer before restarting it.
const liveReadyWait = time.Minute

// waitReady polls check until it succeeds, the process dies, or the deadline passes. A failure
// names the service, the last error and the log to read.
func waitReady(ctx context.Context, info Info, check func(context.Context, Info) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx, info)
		ccancel()
		if last == nil {
			return nil
		}
		if !alive(info.PID) {
			return fmt.Errorf("%s exited while starting (last check: %v); see its log %s:\n%s",
				info.Service, last, info.Log, tail(info.Log, 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (last check: %v); see its log %s:\n%s",
				info.Service, readyTimeout, last, info.Log, tail(info.Log, 15))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// alive reports whether a process with pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesized command name: "pid (comm) S ...".
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// Service ports are drawn from below Linux's default ephemeral range (32768-60999), which the
// kernel hands out for port 0 and outgoing connections: a halted service's port stays free for
// its restart instead of being taken by a worker's metrics listener on 127.0.0.1:0 meanwhile.
const (
	servicePortLow  = 20000
	servicePortHigh = 32767
)

// freePort finds a free loopback TCP port for a service, outside the ephemeral range.
func freePort() (int, error) {
	for range 200 {
		port := servicePortLow + rand.IntN(servicePortHigh-servicePortLow+1)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("finding a free port in %d-%d: 200 tries found none", servicePortLow, servicePortHigh)
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tool returns the path of a cached or installed tool, or an error saying how to install it.
func (s *Stack) tool(name string, candidates ...string) (string, error) {
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s is not installed (looked in %s and PATH); run `make tools` (scripts/install-tools.sh)",
		name, strings.Join(candidates, ", "))
}
