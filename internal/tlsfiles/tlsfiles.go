// Package tlsfiles builds the client TLS configuration of a connection from the PEM files a
// pipeline config names (a CA bundle, a client certificate and key, a server name): one reading
// of those files and one set of error messages for every service that takes them (Temporal,
// ClickHouse).
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Files are the TLS settings of one connection, as a config section holds them.
type Files struct {
	// Key is the config key of the section (temporal.tls, sink.clickhouse.tls): errors name
	// Key.ca_file, Key.cert_file and Key.key_file.
	Key string
	// CAFile is a PEM bundle of the CAs that sign the server's certificate; empty: the
	// system's roots.
	CAFile string
	// CertFile and KeyFile are the client certificate and its key (mTLS); both or neither.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must carry; empty: the dialed host.
	ServerName string
	// InsecureSkipVerify accepts any certificate: the connection is encrypted but anyone in
	// the path can read and change it. Only for a config that says so explicitly.
	InsecureSkipVerify bool
}

// Config returns the client TLS configuration of f: TLS 1.2 or later, the server verified
// against CAFile (else the system's roots) under ServerName when set, the client certificate
// presented when set. A CA file that cannot be read or holds no certificate, and a client pair
// that does not load, are errors naming the key and the file.
func Config(f Files) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName, InsecureSkipVerify: f.InsecureSkipVerify}
	if f.CAFile != "" {
		pool, err := readCA(f.Key, f.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if f.CertFile != "" || f.KeyFile != "" {
		if f.CertFile == "" || f.KeyFile == "" {
			return nil, fmt.Errorf("%s: cert_file and key_file go together; set both for a client certificate, or neither", f.Key)
		}
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the client certificate (%s.cert_file %s, %s.key_file %s): %w", f.Key, f.CertFile, f.Key, f.KeyFile, err)
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
