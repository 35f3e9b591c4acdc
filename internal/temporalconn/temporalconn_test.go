package temporalconn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/config"
)

func TestOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      config.Temporal
		tls     bool
		creds   bool
		wantErr string
	}{
		{"plaintext", config.Temporal{Address: "a:1"}, false, false, ""},
		{"tls enabled", config.Temporal{Address: "a:1", TLS: config.TLS{Enabled: true}}, true, false, ""},
		{"server name alone turns tls on", config.Temporal{Address: "a:1", TLS: config.TLS{ServerName: "x"}}, true, false, ""},
		{"api key turns tls on", config.Temporal{Address: "a:1", APIKey: "k"}, true, true, ""},
		{"missing ca file", config.Temporal{Address: "a:1", TLS: config.TLS{CAFile: filepath.Join(dir, "none")}}, false, false, "reading temporal.tls.ca_file"},
		{"ca file without a certificate", config.Temporal{Address: "a:1", TLS: config.TLS{CAFile: notPEM}}, false, false, "holds no PEM certificate"},
		{"bad client pair", config.Temporal{Address: "a:1", TLS: config.TLS{CertFile: notPEM, KeyFile: notPEM}}, false, false, "temporal.tls.cert_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := Options(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := o.ConnectionOptions.TLS != nil; got != tt.tls {
				t.Errorf("TLS on: %v, want %v", got, tt.tls)
			}
			if got := o.Credentials != nil; got != tt.creds {
				t.Errorf("credentials set: %v, want %v", got, tt.creds)
			}
			if o.ConnectionOptions.TLS != nil && o.ConnectionOptions.TLS.InsecureSkipVerify {
				t.Error("TLS skips verifying the server")
			}
		})
	}
}
