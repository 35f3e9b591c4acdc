package pgpools

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestSetKeepsOnePoolPerDSN checks the set's contract without a server (pools connect lazily):
// one pool per DSN, configure applied to each new one, a DSN that does not parse never quoted (it may
// hold a password), and nothing lent after Close.
func TestSetKeepsOnePoolPerDSN(t *testing.T) {
	t.Parallel()
	configured := 0
	configure := func(c *pgxpool.Config) { configured++; c.MaxConns = 3 }
	s := &Set{}
	a1, err := s.Get("postgres://u@127.0.0.1:1/a", configure)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := s.Get("postgres://u@127.0.0.1:1/a", configure)
	b, _ := s.Get("postgres://u@127.0.0.1:1/b", configure)
	if a1 != a2 || a1 == b {
		t.Errorf("same DSN: same pool %v (want true); other DSN: same pool %v (want false)", a1 == a2, a1 == b)
	}
	if configured != 2 || a1.Config().MaxConns != 3 {
		t.Errorf("Configure ran %d times (want 2, once per pool), MaxConns %d (want 3)", configured, a1.Config().MaxConns)
	}
	if _, err := s.Get("postgres://u:s3cret@127.0.0.1:notaport/a", configure); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a DSN that does not parse: %v; want an error that does not quote it", err)
	}
	s.Close()
	if _, err := s.Get("postgres://u@127.0.0.1:1/a", configure); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
}
