package plugintest

import (
	"testing"

	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TLSFiles are PEM files of a CA a test makes for itself and of a server and a client
// certificate it signed, for name and 127.0.0.1.
type TLSFiles struct {
	CA                    string // the CA's certificate
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewTLSFiles writes a fresh CA, server and client certificate for name into a temporary
// directory of t.
func NewTLSFiles(t testing.TB, name string) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	ca := testenv.NewCA(t, name+" test CA")
	_, serverCert, serverKey := ca.Issue(t, name, false)
	_, clientCert, clientKey := ca.Issue(t, name, true)
	return TLSFiles{
		CA:         testenv.WriteFile(t, dir, "ca.pem", ca.PEM),
		ServerCert: testenv.WriteFile(t, dir, "server.pem", serverCert),
		ServerKey:  testenv.WriteFile(t, dir, "server-key.pem", serverKey),
		ClientCert: testenv.WriteFile(t, dir, "client.pem", clientCert),
		ClientKey:  testenv.WriteFile(t, dir, "client-key.pem", clientKey),
	}
}
