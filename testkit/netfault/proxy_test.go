package netfault

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echoServer is a real TCP server on 127.0.0.1 that writes back every line it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// proxyTo starts a proxy to target, served until cleanup.
func proxyTo(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background()) }()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve after Close: %v", err)
		}
	})
	return p
}

// roundTrip sends line over c and reads the echo, with a deadline.
func roundTrip(c net.Conn, line string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

// echoOnce dials addr and round-trips line on a new connection; a refused connection may fail
// at the dial or at the first read.
func echoOnce(addr, line string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return roundTrip(c, line)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitLive waits until the proxy forwards n connections (it registers them after dialling the
// target, a moment after the client's dial returned).
func waitLive(t *testing.T, p *Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Live() != n {
		if time.Now().After(deadline) {
			t.Fatalf("proxy forwards %d connections, want %d", p.Live(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProxy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, p *Proxy)
	}{
		{"forwards both ways", func(t *testing.T, p *Proxy) {
			c := dial(t, p.Addr())
			for _, line := range []string{"hello", "again"} {
				got, err := roundTrip(c, line)
				if err != nil || got != line {
					t.Fatalf("round trip %q: got %q, %v", line, got, err)
				}
			}
			if s := p.Stats(); s.Accepted != 1 || s.Refused != 0 || s.Cut != 0 {
				t.Fatalf("stats %+v, want one accepted", s)
			}
		}},
		{"cut closes live connections and refuses new ones", func(t *testing.T, p *Proxy) {
			a, b := dial(t, p.Addr()), dial(t, p.Addr())
			for _, c := range []net.Conn{a, b} {
				if _, err := roundTrip(c, "before"); err != nil {
					t.Fatal(err)
				}
			}
			waitLive(t, p, 2)
			if n := p.Cut(); n != 2 {
				t.Fatalf("Cut closed %d connections, want 2", n)
			}
			for _, c := range []net.Conn{a, b} {
				if got, err := roundTrip(c, "during"); err == nil {
					t.Fatalf("a cut connection still echoes %q", got)
				}
			}
			if got, err := echoOnce(p.Addr(), "new"); err == nil {
				t.Fatalf("a connection made while cut echoes %q", got)
			}
			if s := p.Stats(); s.Cut != 2 || s.Refused != 1 || s.Accepted != 2 {
				t.Fatalf("stats %+v, want 2 accepted, 2 cut, 1 refused", s)
			}
		}},
		{"restore forwards new connections again", func(t *testing.T, p *Proxy) {
			p.Cut()
			p.Restore()
			got, err := echoOnce(p.Addr(), "after")
			if err != nil || got != "after" {
				t.Fatalf("after Restore: got %q, %v", got, err)
			}
		}},
		{"an unreachable target refuses", func(t *testing.T, _ *Proxy) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			gone := ln.Addr().String()
			_ = ln.Close()
			p := proxyTo(t, gone)
			if got, err := echoOnce(p.Addr(), "x"); err == nil {
				t.Fatalf("a proxy to a closed port echoes %q", got)
			}
			if s := p.Stats(); s.Refused != 1 {
				t.Fatalf("stats %+v, want 1 refused", s)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, proxyTo(t, echoServer(t)))
		})
	}
}

func TestServeEndsWithContext(t *testing.T) {
	t.Parallel()
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "up"); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve returned %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := roundTrip(c, "down"); err == nil {
		t.Fatal("a connection outlived Serve")
	}
}
