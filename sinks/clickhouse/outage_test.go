package clickhouse

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest/orders"
	"github.com/sluicecdc/sluice/testkit/devstack"
)

// privateServer is a ClickHouse server of the test's own, started by devstack in a private
// stack directory, that the test may stop, kill and restart on the same ports and data. The
// shared test server is never stopped.
type privateServer struct {
	t      *testing.T
	dir    string
	config string
	addr   string
	pid    int
	exited chan struct{} // closed when the process the test restarted exits; nil for devstack's
}

func startPrivateServer(t *testing.T) *privateServer {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a private ClickHouse server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "stack")
	s, err := devstack.New(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Ensure(ctx, devstack.ServiceClickHouse)
	if err != nil {
		t.Fatalf("starting a private clickhouse: %v", err)
	}
	p := &privateServer{t: t, dir: filepath.Dir(info.Extra["config"]), config: info.Extra["config"], addr: info.Addr, pid: info.PID}
	t.Cleanup(func() { p.stop(syscall.SIGKILL) })
	return p
}

func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2] != 'Z'
		}
	}
	return true
}

// stop sends sig to the server and waits for it to exit.
func (p *privateServer) stop(sig syscall.Signal) {
	if p.pid == 0 {
		return
	}
	_ = syscall.Kill(p.pid, sig)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if p.exited != nil {
			select {
			case <-p.exited:
				p.pid = 0
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !processAlive(p.pid) {
			p.pid = 0
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Errorf("clickhouse pid %d did not exit after %v", p.pid, sig)
}

// restart starts the server again with the same config (same ports, same data) and waits until
// it answers.
func (p *privateServer) restart() error {
	bin, err := exec.LookPath("clickhouse-server")
	if err != nil {
		bin = "/usr/bin/clickhouse-server"
	}
	logf, err := os.OpenFile(filepath.Join(p.dir, "restart.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config-file="+p.config)
	cmd.Dir, cmd.Stdout, cmd.Stderr = p.dir, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restarting clickhouse: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.pid, p.exited = cmd.Process.Pid, exited
	deadline := time.Now().Add(90 * time.Second)
	for {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{p.addr}, DialTimeout: time.Second})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err = conn.Ping(ctx)
			cancel()
			_ = conn.Close()
		}
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("restarted clickhouse exited; see %s", filepath.Join(p.dir, "restart.log"))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("restarted clickhouse not ready: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// outage is how long TestServerOutage keeps the server down.
func outage() time.Duration {
	if s := os.Getenv("SLUICE_CH_OUTAGE"); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	return 5 * time.Second
}

// TestServerOutage stops the sink's server mid-stream: Apply fails transiently (never poison)
// while it is down, the retries are visible, and after the restart the same batch commits and
// the stream catches up with nothing lost. SLUICE_CH_OUTAGE=30s runs the 30 seconds.
func TestServerOutage(t *testing.T) {
	t.Parallel()
	p := startPrivateServer(t)
	h := newHarness(t, p.addr)
	for i := range 5 {
		h.apply(orders.Insert(int64(i), "before", i), orders.Update(int64(i), "before2", i+1))
	}
	h.check("before the outage")

	p.stop(syscall.SIGTERM)
	down := time.Now()
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(outage())
		restarted <- p.restart()
	}()

	// The stream goes on: the next batch is retried until it commits, as CommitBatch's retry
	// policy would.
	b := h.batch(batch.PhaseStream, orders.Update(1, "during", 100), orders.Delete(2), orders.Insert(10, "new", 10))
	attempts, backoff := 0, 200*time.Millisecond
	for {
		attempts++
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := h.sink.Apply(ctx, b)
		cancel()
		if err == nil {
			break
		}
		if sinks.IsPoison(err) {
			t.Fatalf("attempt %d during the outage: poison %v, want a transient error", attempts, err)
		}
		t.Logf("attempt %d after %v down: transient: %v", attempts, time.Since(down).Round(time.Millisecond), err)
		if time.Since(down) > outage()+2*time.Minute {
			t.Fatalf("still failing %v after the server went down", time.Since(down))
		}
		time.Sleep(backoff)
		backoff = min(backoff*2, 2*time.Second)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	h.done = append(h.done, b)
	t.Logf("committed after %d attempts, %v after the server went down", attempts, time.Since(down).Round(time.Millisecond))
	if attempts < 2 {
		t.Errorf("the first attempt succeeded while the server was down")
	}
	h.check("after the outage")
	if pos, _ := h.position(); pos != b.Hi {
		t.Fatalf("position %v, want %v", pos, b.Hi)
	}
	for i := range 3 {
		h.apply(orders.Insert(int64(20+i), "after", i), orders.Delete(int64(3+i)))
	}
	h.check("catching up")
}

// TestCrashMidInsertIsAtomic kills the server (SIGKILL) while a large batch is being inserted:
// after the restart the batch's rows and its position marker are either both there or both
// absent, and re-applying the batch completes it.
func TestCrashMidInsertIsAtomic(t *testing.T) {
	t.Parallel()
	p := startPrivateServer(t)
	h := newHarness(t, p.addr)
	h.apply(orders.Insert(1, "seed", 1))
	const n = 200_000
	big := func(tag string) []batch.Change {
		cs := make([]batch.Change, n)
		for i := range cs {
			cs[i] = orders.Insert(int64(1000+i), tag, i)
		}
		return cs
	}
	// Time one insert of the same size to aim the kill into the middle of the next ones.
	timing := h.batch(batch.PhaseStream, big("timing")...)
	start := time.Now()
	if err := h.sink.Apply(t.Context(), timing); err != nil {
		t.Fatal(err)
	}
	full := time.Since(start)
	h.done = append(h.done, timing)
	t.Logf("Apply of one %d-row batch took %v", n, full)

	outcomes := map[string]int{}
	for round, frac := range []float64{0.3, 0.6, 0.9, 1.0} {
		b := h.batch(batch.PhaseStream, big(fmt.Sprintf("round%d", round))...)
		pre, _ := h.position()
		done := make(chan error, 1)
		go func() { done <- h.sink.Apply(context.Background(), b) }()
		time.Sleep(time.Duration(frac * float64(full)))
		p.stop(syscall.SIGKILL)
		applyErr := <-done
		if err := p.restart(); err != nil {
			t.Fatal(err)
		}
		rows := h.count(fmt.Sprintf("SELECT count() FROM %s.orders WHERE _version = %d AND _sluice_marker = 0",
			quote(h.db), b.Hi.Position.LSN))
		pos, _ := h.position()
		committed := pos == b.Hi
		switch {
		case committed && rows == n:
			outcomes["committed"]++
		case !committed && rows == 0 && pos == pre:
			outcomes["absent"]++
		default:
			t.Fatalf("round %d: after the crash %d of %d rows are there and the position is %v (batch hi %v, before %v): not atomic",
				round, rows, n, pos, b.Hi, pre)
		}
		t.Logf("round %d (kill at %.0f%%): Apply returned %v; rows %d, committed %v", round, frac*100, applyErr, rows, committed)
		if applyErr == nil && !committed {
			t.Fatalf("round %d: Apply succeeded but the batch is not there", round)
		}
		// The caller retries; a committed batch is skipped by its watermark.
		if err := h.sink.Apply(t.Context(), b); err != nil {
			t.Fatalf("round %d: re-applying after the restart: %v", round, err)
		}
		h.done = append(h.done, b)
	}
	t.Logf("outcomes: %v", outcomes)
	h.check("after the crashes")
}
