// Package temporalconn turns the temporal section of a pipeline config into the Temporal client
// options that the worker and the starter dial with: address, namespace, TLS (a CA, a client
// certificate for mTLS, a server name) and an API key (Temporal Cloud). Both processes dial
// through it, so they reach the same cluster the same way.
package temporalconn

import (
	"context"
	"crypto/tls"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/sluicecdc/sluice/config"
)

// Options returns the client options of t: HostPort, Namespace and ConnectionOptions (TLS,
// credentials). The caller adds its logger and metrics handler. The files t names are read
// here; their errors name the key that set them.
func Options(t config.Temporal) (client.Options, error) {
	o := client.Options{HostPort: t.Address, Namespace: t.Namespace}
	if t.On() {
		tc, err := TLSConfig(t.TLS)
		if err != nil {
			return client.Options{}, err
		}
		o.ConnectionOptions.TLS = tc
	}
	if t.APIKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(t.APIKey)
	}
	return o, nil
}

// TLSConfig is the TLS configuration of s: the server is verified against the CA file (else the
// system's roots), under ServerName when set, and the client certificate is presented when set.
// There is no setting to skip verifying the server.
func TLSConfig(s config.TLS) (*tls.Config, error) {
	return s.ClientConfig("temporal.tls")
}

// Dial connects to the Temporal frontend t names with base's other options (logger, metrics).
// Its error names the address and the settings to check.
func Dial(ctx context.Context, t config.Temporal, base client.Options) (client.Client, error) {
	o, err := Options(t)
	if err != nil {
		return nil, err
	}
	base.HostPort, base.Namespace = o.HostPort, o.Namespace
	base.ConnectionOptions.TLS = o.ConnectionOptions.TLS
	base.Credentials = o.Credentials
	c, err := client.DialContext(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("connecting to Temporal at %s (%s): %w; check temporal.address, temporal.namespace and, for a secured cluster, temporal.tls (ca_file, cert_file, key_file, server_name) and temporal.api_key",
			t.Address, describe(t), err)
	}
	return c, nil
}

// describe says how the connection was made, for error messages: plaintext, TLS, mTLS, API key.
func describe(t config.Temporal) string {
	switch {
	case !t.On():
		return "plaintext, no TLS"
	case t.TLS.CertFile != "":
		return "mTLS"
	case t.APIKey != "":
		return "TLS with an API key"
	}
	return "TLS, no client certificate"
}
