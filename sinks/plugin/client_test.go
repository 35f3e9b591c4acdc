package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/plugin"
	"github.com/sluicecdc/sluice/sinks/plugin/plugintest"
	"github.com/sluicecdc/sluice/sinks/plugin/sdk"
	"github.com/sluicecdc/sluice/sinks/sinktest"
)

// scripted is a plugin's sink whose calls a test scripts; unset functions succeed.
type scripted struct {
	ensure    func(sinks.TableSpec) error
	apply     func(sinks.Batch) error
	position  func() (batch.SourcePosition, bool, error)
	positions atomic.Int32 // Position calls that reached the plugin
}

func (s *scripted) EnsureTable(_ context.Context, spec sinks.TableSpec) error {
	if s.ensure == nil {
		return nil
	}
	return s.ensure(spec)
}

func (s *scripted) Position(context.Context, sinks.TableSpec) (batch.SourcePosition, bool, error) {
	s.positions.Add(1)
	if s.position == nil {
		return batch.SourcePosition{}, false, nil
	}
	return s.position()
}

func (s *scripted) Apply(_ context.Context, b sinks.Batch) error {
	if s.apply == nil {
		return nil
	}
	return s.apply(b)
}

func (s *scripted) DiscardSnapshot(context.Context, sinks.TableSpec) error { return nil }
func (s *scripted) Close(context.Context) error                            { return nil }

// serve serves s in this process until the test ends and returns its address.
func serve(t *testing.T, s sinks.Sink, opts sdk.ServeOptions) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Listener = lis
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sdk.Serve(ctx, s, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

func open(t *testing.T, cfg plugin.Config) *plugin.Client {
	t.Helper()
	c, err := plugin.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func TestHandshakeAndOwnPosition(t *testing.T) {
	t.Parallel()
	want := batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: 0x1234_5678_9ABC, Seq: 7}}
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("own position %t", own), func(t *testing.T) {
			t.Parallel()
			s := &scripted{position: func() (batch.SourcePosition, bool, error) { return want, true, nil }}
			c := open(t, plugin.Config{Address: serve(t, s, sdk.ServeOptions{OwnPosition: own, Name: "scripted", Version: "9"})})
			hs := c.Handshake()
			if hs.OwnPosition != own || c.OwnPosition() != own || !hs.Deletes || hs.Maintenance || hs.Name != "scripted" || hs.Version != "9" || hs.ProtocolVersion != 1 {
				t.Fatalf("handshake %+v, want own position %t, deletes, no maintenance, scripted 9, version 1", hs, own)
			}
			pos, ok, err := c.Position(t.Context(), sinktest.Spec("t"))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case own && (!ok || pos != want):
				t.Fatalf("Position = %v, %t; want %v from the plugin", pos, ok, want)
			case !own && (ok || s.positions.Load() != 0):
				t.Fatalf("Position = %v, %t after %d plugin calls; want none without asking the plugin", pos, ok, s.positions.Load())
			}
		})
	}
}

// TestErrorClassification checks that poison and transient failures of every kind of call keep
// their class across the connection.
func TestErrorClassification(t *testing.T) {
	t.Parallel()
	spec := sinktest.Spec("t")
	b := sinktest.Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x10, Seq: 1}, sinktest.Upsert(1, "a", 1, 0x10, 1))
	tests := []struct {
		name   string
		err    error
		poison bool
	}{
		{"poison", sinks.Poisonf("column qty: value 9999999999 out of range for integer"), true},
		{"wrapped poison", fmt.Errorf("writing: %w", sinks.Poisonf("constraint orders_qty_check")), true},
		{"transient", errors.New("connection reset by peer"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &scripted{ensure: func(sinks.TableSpec) error { return tc.err }, apply: func(sinks.Batch) error { return tc.err },
				position: func() (batch.SourcePosition, bool, error) { return batch.SourcePosition{}, false, tc.err }}
			c := open(t, plugin.Config{Address: serve(t, s, sdk.ServeOptions{OwnPosition: true})})
			_, _, perr := c.Position(t.Context(), spec)
			for call, err := range map[string]error{"EnsureTable": c.EnsureTable(t.Context(), spec), "Apply": c.Apply(t.Context(), b), "Position": perr} {
				if err == nil || sinks.IsPoison(err) != tc.poison || !strings.Contains(err.Error(), tc.err.Error()) || !strings.Contains(err.Error(), "target t") {
					t.Errorf("%s: error %v (poison %t); want %q as poison %t, naming the target", call, err, sinks.IsPoison(err), tc.err, tc.poison)
				}
			}
		})
	}
}

// TestApplyRoundTrip sends a batch several times ChunkBytes large and checks that the plugin's
// sink gets the same spec, watermark, phase and every row.
func TestApplyRoundTrip(t *testing.T) {
	t.Parallel()
	spec := sinktest.Spec("raw.orders")
	const n = 30000
	name := strings.Repeat("x", 100)
	var changes []batch.Change
	for i := range int64(n) {
		changes = append(changes, sinktest.Upsert(i, fmt.Sprint(name, i), int32(i), 0x2000, uint32(i+1)))
	}
	changes = append(changes, sinktest.Delete(n, 0x2000, n+1))
	b := sinktest.Batch(t, spec, batch.PhaseStream, batch.Position{LSN: 0x2000, Seq: n + 1}, changes...)
	var got atomic.Pointer[string]
	s := &scripted{apply: func(g sinks.Batch) error {
		var diffs []string
		if fmt.Sprint(g.Spec) != fmt.Sprint(spec) {
			diffs = append(diffs, fmt.Sprintf("spec %+v, want %+v", g.Spec, spec))
		}
		if g.Lo != b.Lo || g.Hi != b.Hi || g.Phase != b.Phase {
			diffs = append(diffs, fmt.Sprintf("watermark %s..%s %s, want %s..%s %s", g.Lo, g.Hi, g.Phase, b.Lo, b.Hi, b.Phase))
		}
		if !array.RecordEqual(g.Record, b.Record) {
			diffs = append(diffs, fmt.Sprintf("record of %d rows differs from the %d sent", g.Record.NumRows(), b.Record.NumRows()))
		}
		d := strings.Join(diffs, "; ")
		got.Store(&d)
		return nil
	}}
	c := open(t, plugin.Config{Address: serve(t, s, sdk.ServeOptions{})})
	if err := c.Apply(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if d := got.Load(); d == nil || *d != "" {
		t.Fatalf("the plugin got another batch: %v", d)
	}
	// The end of a snapshot: no rows.
	end := sinktest.Batch(t, spec, batch.PhaseSnapshot, batch.Position{LSN: 0x3000})
	s.apply = func(g sinks.Batch) error {
		if g.Record.NumRows() != 0 || g.Hi != end.Hi || int(g.Record.NumCols()) != len(spec.Schema.Columns)+batch.NumContextColumns {
			return fmt.Errorf("snapshot end: %d rows, %d columns, hi %s", g.Record.NumRows(), g.Record.NumCols(), g.Hi)
		}
		return nil
	}
	if err := c.Apply(t.Context(), end); err != nil {
		t.Fatal(err)
	}
}

// TestTLSAndToken serves with TLS and a bearer token: the configured worker gets through; a
// wrong token, or no TLS, does not, and says why.
func TestTLSAndToken(t *testing.T) {
	t.Parallel()
	files := plugintest.NewTLSFiles(t, "plugin.test")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, &scripted{}, sdk.ServeOptions{TLSCertFile: files.ServerCert, TLSKeyFile: files.ServerKey,
		TLSClientCAFile: files.CA, TokenFile: tokenFile})
	good := plugin.Config{Address: addr, Token: "s3cret-token", TLS: config.TLS{CAFile: files.CA,
		CertFile: files.ClientCert, KeyFile: files.ClientKey, ServerName: "plugin.test"}}
	c := open(t, good)
	if err := c.EnsureTable(t.Context(), sinktest.Spec("t")); err != nil {
		t.Fatalf("EnsureTable with TLS and the token: %v", err)
	}
	wrong := good
	wrong.Token = "guess"
	noTLS := plugin.Config{Address: addr}
	noCert := good
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	for name, cfg := range map[string]plugin.Config{"wrong token": wrong, "no TLS": noTLS, "no client certificate": noCert} {
		_, err := plugin.Open(t.Context(), cfg)
		if err == nil || sinks.IsPoison(err) {
			t.Errorf("%s: Open returned %v, want a transient error", name, err)
		}
		if name == "wrong token" && (err == nil || !strings.Contains(err.Error(), "sink.plugin.token")) {
			t.Errorf("%s: %v; want it to name sink.plugin.token", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the token: %v", name, err)
		}
	}
}
