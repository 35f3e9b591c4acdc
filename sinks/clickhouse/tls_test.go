package clickhouse

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
)

// TestTLSConfig builds the sink's TLS configuration from sink.clickhouse.tls and handshakes with
// a TLS server whose certificate (self-signed, for example.com and 127.0.0.1) is the CA file:
// verified with the CA, refused without it or under another name, accepted unverified only
// with insecure_skip_verify; a missing or non-PEM CA file is an error naming the key and the
// file, and stops New before it connects, as poison (a config problem, not worth retrying).
func TestTLSConfig(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")

	tests := []struct {
		name      string
		tls       config.ClickHouseTLS
		buildErr  string // TLSConfig's error
		handshake string // the handshake's error; "" when it succeeds
	}{
		{name: "ca file", tls: config.ClickHouseTLS{TLS: config.TLS{CAFile: caFile}}},
		{name: "ca file and the certificate's name", tls: config.ClickHouseTLS{TLS: config.TLS{CAFile: caFile, ServerName: "example.com"}}},
		{name: "system roots do not know the CA", tls: config.ClickHouseTLS{TLS: config.TLS{Enabled: true}}, handshake: "certificate signed by unknown authority"},
		{name: "a name the certificate does not carry", tls: config.ClickHouseTLS{TLS: config.TLS{CAFile: caFile, ServerName: "clickhouse.internal"}},
			handshake: "certificate is valid for example.com"},
		{name: "insecure skip verify", tls: config.ClickHouseTLS{InsecureSkipVerify: true}},
		{name: "missing ca file", tls: config.ClickHouseTLS{TLS: config.TLS{CAFile: missing}}, buildErr: "reading sink.clickhouse.tls.ca_file: open " + missing},
		{name: "ca file without a certificate", tls: config.ClickHouseTLS{TLS: config.TLS{CAFile: notPEM}},
			buildErr: "sink.clickhouse.tls.ca_file " + notPEM + " holds no PEM certificate"},
		{name: "client pair that does not load", tls: config.ClickHouseTLS{TLS: config.TLS{CAFile: caFile, CertFile: notPEM, KeyFile: notPEM}},
			buildErr: "loading the client certificate (sink.clickhouse.tls.cert_file " + notPEM},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := TLSConfig(tc.tls)
			if tc.buildErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.buildErr) {
					t.Fatalf("TLSConfig: %v, want an error with %q", err, tc.buildErr)
				}
				_, err := New(context.Background(), Config{Addr: "127.0.0.1:1", TLS: tc.tls}, nil)
				if err == nil || !strings.Contains(err.Error(), tc.buildErr) || !sinks.IsPoison(err) {
					t.Fatalf("New: %v, want a poison error with %q", err, tc.buildErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.InsecureSkipVerify != tc.tls.InsecureSkipVerify {
				t.Fatalf("InsecureSkipVerify %v, want it only when the config asks", cfg.InsecureSkipVerify)
			}
			if cfg.MinVersion < tls.VersionTLS12 {
				t.Errorf("MinVersion %x, want TLS 1.2 or later", cfg.MinVersion)
			}
			conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), cfg)
			if err == nil {
				conn.Close()
			}
			switch {
			case tc.handshake == "" && err != nil:
				t.Fatalf("handshake: %v", err)
			case tc.handshake != "" && (err == nil || !strings.Contains(err.Error(), tc.handshake)):
				t.Fatalf("handshake: %v, want an error with %q", err, tc.handshake)
			}
		})
	}
}
