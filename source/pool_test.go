package source

import (
	"context"
	"errors"
	"testing"
)

// TestPoolReusesConnections checks what the pool promises its borrowers: a released connection
// is lent again (the same backend), one borrowed at the same time is another, one released in a
// transaction or by a nil Pool is not reused, every connection carries the source session
// settings, and a closed pool lends nothing.
func TestPoolReusesConnections(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	backend := func(c *Conn) (pid int) {
		t.Helper()
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	acquire := func(p *Pool) *Conn {
		t.Helper()
		c, err := p.Acquire(ctx, db.dsn)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	p := &Pool{}
	defer p.Close()
	a := acquire(p)
	first := backend(a)
	var style, app string
	if err := a.QueryRow(ctx, "SELECT current_setting('IntervalStyle'), current_setting('application_name')").Scan(&style, &app); err != nil {
		t.Fatal(err)
	}
	if style != sessionParams["IntervalStyle"] || app != sessionParams["application_name"] {
		t.Errorf("pooled connection runs IntervalStyle %q, application_name %q; want the source session settings %q, %q",
			style, app, sessionParams["IntervalStyle"], sessionParams["application_name"])
	}
	b := acquire(p)
	second := backend(b)
	if second == first {
		t.Error("two connections borrowed at once share a backend")
	}
	b.Release(ctx)
	a.Release(ctx)
	c := acquire(p)
	if pid := backend(c); pid != first && pid != second {
		t.Errorf("a released connection was not lent again: backend %d, released %d and %d", pid, first, second)
	}
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	inTx := backend(c)
	c.Release(ctx)
	var held []*Conn
	for range poolMaxConns {
		d := acquire(p)
		held = append(held, d)
		if backend(d) == inTx {
			t.Errorf("backend %d was lent again after its borrower left a transaction open", inTx)
		}
	}
	for _, d := range held {
		d.Release(ctx)
	}

	var none *Pool
	own := acquire(none)
	ownPID := backend(own)
	own.Release(ctx)
	if !own.IsClosed() {
		t.Errorf("a nil Pool's connection (backend %d) stayed open after Release", ownPID)
	}

	p.Close()
	if _, err := p.Acquire(ctx, db.dsn); !errors.Is(err, errPoolClosed) {
		t.Errorf("Acquire after Close: %v, want errPoolClosed", err)
	}
}
