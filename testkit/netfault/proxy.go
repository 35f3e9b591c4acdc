package netfault

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Stats counts what a Proxy did since it was created.
type Stats struct {
	Accepted int // connections accepted and forwarded to the target
	Refused  int // connections accepted while cut (or whose target dial failed) and closed at once
	Cut      int // live connections closed by Cut
}

// Proxy forwards TCP connections from its own address on 127.0.0.1 to a target address. Cut
// closes every live connection and refuses new ones (they are accepted and closed at once, as a
// peer that resets them) until Restore. Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{} // both ends of every live forwarded connection
	stats  Stats
}

// New listens on 127.0.0.1 on a free port for connections to forward to target (host:port).
// Nothing is forwarded until Serve runs; Close releases the port.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for a proxy to %s: %w", target, err)
	}
	return &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}, nil
}

// NewTLS is New with TLS terminated at the proxy under cfg: clients speak TLS to it (mTLS when
// cfg requires client certificates) and the target gets the plain bytes, as behind a load
// balancer that terminates TLS in front of the real server.
func NewTLS(target string, cfg *tls.Config) (*Proxy, error) {
	p, err := New(target)
	if err != nil {
		return nil, err
	}
	p.ln = tls.NewListener(p.ln, cfg)
	return p, nil
}

// Addr is the proxy's host:port, the address to give the client instead of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Serve accepts and forwards connections until ctx is done or Close is called, then closes
// every live connection and returns once all its forwarding goroutines have ended. It returns
// nil after Close and ctx.Err() when ctx ended it. Call it once.
func (p *Proxy) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = p.Close() })
	defer stop()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.closeAll()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if p.isClosed() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accepting on proxy %s: %w", p.Addr(), err)
		}
		wg.Go(func() { p.forward(c) })
	}
}

// forward dials the target for client c and copies both ways until either side ends or Cut
// closes them.
func (p *Proxy) forward(c net.Conn) {
	if p.isCut() {
		p.refuse(c)
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.refuse(c)
		return
	}
	if !p.track(c, up) {
		_ = up.Close()
		p.refuse(c)
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// One direction ended: end the connection, as a TCP peer going away does.
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Go(func() { pipe(up, c) })
	wg.Go(func() { pipe(c, up) })
	wg.Wait()
	p.untrack(c, up)
}

// track registers a new forwarded connection; false when the proxy was cut or closed meanwhile.
func (p *Proxy) track(c, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.stats.Accepted++
	return true
}

func (p *Proxy) untrack(c, up net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	delete(p.conns, up)
}

// refuse counts c as refused, then closes it with a reset, as a refused or dropped connection
// looks to the client (counted first, so a client that sees the reset sees the count).
func (p *Proxy) refuse(c net.Conn) {
	p.mu.Lock()
	p.stats.Refused++
	p.mu.Unlock()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// Cut closes every live connection (both ends, with a reset) and refuses new ones until
// Restore. It returns how many client connections it closed.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	p.cut = true
	live := p.takeConns()
	n := len(live) / 2
	p.stats.Cut += n
	p.mu.Unlock()
	for _, c := range live {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
	return n
}

// Restore forwards new connections again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Live is the number of client connections being forwarded now.
func (p *Proxy) Live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops accepting and closes every live connection. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if already {
		return nil
	}
	err := p.ln.Close()
	p.closeAll()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("closing proxy %s: %w", p.Addr(), err)
	}
	return nil
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	live := p.takeConns()
	p.mu.Unlock()
	for _, c := range live {
		_ = c.Close()
	}
}

// takeConns empties the live set and returns its connections; p.mu must be held.
func (p *Proxy) takeConns() []net.Conn {
	out := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	clear(p.conns)
	return out
}

func (p *Proxy) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}
