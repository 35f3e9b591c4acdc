package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLS is the TLS of one connection (temporal.tls, sink.clickhouse.tls, sink.plugin.tls). Setting
// any key turns TLS on; the server's certificate is verified (against CAFile, else the system's
// roots).
type TLS struct {
	Enabled    bool   `json:"enabled,omitempty"`     // TLS with the system's roots when no other key is set
	CAFile     string `json:"ca_file,omitempty"`     // PEM CA bundle that signs the server's certificate
	CertFile   string `json:"cert_file,omitempty"`   // PEM client certificate (mTLS); needs key_file
	KeyFile    string `json:"key_file,omitempty"`    // PEM private key of cert_file
	ServerName string `json:"server_name,omitempty"` // name to verify instead of the address's host
}

// On reports whether the connection uses TLS: enabled, or any other key set.
func (t TLS) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// ClientConfig returns the client TLS configuration of t, whose config key is key (such as
// temporal.tls): TLS 1.2 or later, the server verified against CAFile (else the system's roots)
// under ServerName when set, the client certificate presented when set. It reads the files: a CA
// file that cannot be read or holds no certificate, and a client pair that does not load, are
// errors naming the key and the file.
func (t TLS) ClientConfig(key string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pool, err := readCA(key, t.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		if t.CertFile == "" || t.KeyFile == "" {
			return nil, fmt.Errorf("%s: cert_file and key_file go together; set both for a client certificate, or neither", key)
		}
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the client certificate (%s.cert_file %s, %s.key_file %s): %w", key, t.CertFile, key, t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// readCA reads the PEM CA bundle at path into a pool; key names the setting in errors.
func readCA(key, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s.ca_file: %w", key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s.ca_file %s holds no PEM certificate; give the CA bundle (-----BEGIN CERTIFICATE-----) that signs the server's certificate", key, path)
	}
	return pool, nil
}

// ClickHouseTLS is the TLS of the connection to ClickHouse: TLS, and InsecureSkipVerify, which
// only ClickHouse takes.
type ClickHouseTLS struct {
	TLS
	// InsecureSkipVerify accepts any server certificate: encrypted, but not protected from
	// anyone in the path. Unsafe; for a test server only.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// On reports whether the connection uses TLS: enabled, or any other key set.
func (t ClickHouseTLS) On() bool { return t.TLS.On() || t.InsecureSkipVerify }

// ClientConfig is TLS.ClientConfig with verification skipped when InsecureSkipVerify says so.
func (t ClickHouseTLS) ClientConfig(key string) (*tls.Config, error) {
	tc, err := t.TLS.ClientConfig(key)
	if err != nil {
		return nil, err
	}
	tc.InsecureSkipVerify = t.InsecureSkipVerify
	return tc, nil
}
