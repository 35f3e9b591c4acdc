package tests

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/netfault"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestTemporalOverTLS runs a pipeline whose worker and starter reach Temporal only through
// TLS-terminating proxies in front of the dev server (which has no TLS of its own), with a CA
// the test makes: over mTLS the pipeline copies its table; over TLS with the CA only the starter
// reads the status; without the client certificate, or without the CA, the mTLS frontend is
// refused with an error that names the address and the settings to check.
func TestTemporalOverTLS(t *testing.T) {
	defer parallel(t)()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir()
	ca := testenv.NewCA(t, "sluice test CA")
	serverCert, _, _ := ca.Issue(t, "temporal.test", false)
	_, clientPEM, clientKey := ca.Issue(t, "sluice-worker", true)
	caFile := testenv.WriteFile(t, dir, "ca.pem", ca.PEM)
	certFile := testenv.WriteFile(t, dir, "client.pem", clientPEM)
	keyFile := testenv.WriteFile(t, dir, "client-key.pem", clientKey)

	frontend := testenv.Temporal(t)
	// The proxy offers h2 by ALPN, as a gRPC server (the frontend itself) does.
	serve := func(cfg *tls.Config) string {
		p, err := netfault.NewTLS(frontend, cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = p.Serve(ctx) }()
		t.Cleanup(func() { _ = p.Close(); <-done })
		return p.Addr()
	}
	mtlsAddr := serve(&tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
	tlsAddr := serve(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})

	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 500))
	caOnly := func(addr string) []string {
		return []string{"SLUICE_TEMPORAL_ADDRESS=" + addr, "SLUICE_TEMPORAL_TLS_CA_FILE=" + caFile, "SLUICE_TEMPORAL_TLS_SERVER_NAME=temporal.test"}
	}
	mtls := append(caOnly(mtlsAddr), "SLUICE_TEMPORAL_TLS_CERT_FILE="+certFile, "SLUICE_TEMPORAL_TLS_KEY_FILE="+keyFile)

	p.env = mtls
	p.worker("worker")
	p.sluice("start")
	p.exec(`UPDATE public.items SET qty = qty + 1 WHERE id <= 20`, `DELETE FROM public.items WHERE id = 7`)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)

	run := func(env []string, args ...string) (string, error) {
		c, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return localrun.Sluice(c, bins.Starter, env, append(args, "--config", p.config)...)
	}
	if out, err := run(caOnly(tlsAddr), "status"); err != nil || !strings.Contains(out, "public.items") {
		t.Fatalf("status over TLS with the test CA: %v\n%s", err, out)
	}

	refused := []struct {
		name, want string
		env        []string
	}{
		// TLS 1.3 sends the server's "certificate required" alert after the handshake, so the
		// client sees either it or a broken pipe: the error names the mode it tried either way.
		{"no client certificate", "(TLS, no client certificate)", caOnly(mtlsAddr)},
		{"no CA: the system's roots do not know the test CA", "certificate signed by unknown authority", []string{"SLUICE_TEMPORAL_ADDRESS=" + mtlsAddr, "SLUICE_TEMPORAL_TLS_SERVER_NAME=temporal.test",
			"SLUICE_TEMPORAL_TLS_CERT_FILE=" + certFile, "SLUICE_TEMPORAL_TLS_KEY_FILE=" + keyFile}},
		{"plaintext to a TLS frontend", "plaintext, no TLS", []string{"SLUICE_TEMPORAL_ADDRESS=" + mtlsAddr}},
	}
	for _, r := range refused {
		out, err := run(r.env, "status")
		if err == nil {
			t.Fatalf("%s: the starter's status succeeded; want it refused:\n%s", r.name, out)
		}
		if msg := err.Error(); !strings.Contains(msg, "connecting to Temporal at "+mtlsAddr) || !strings.Contains(msg, r.want) {
			t.Errorf("%s: the starter's error does not say what failed (want %q):\n%s", r.name, r.want, msg)
		}
	}

	// A worker without its client certificate stops at once, saying why.
	w, err := localrun.StartWorker(bins.Worker, p.config, filepath.Join(dir, "refused.log"), caOnly(mtlsAddr))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Done():
	case <-time.After(2 * time.Minute):
		_ = w.Kill()
		t.Fatal("a worker without its client certificate is still running after 2 minutes; want it to exit")
	}
	log, _ := os.ReadFile(w.Log)
	if !strings.Contains(string(log), "connecting to Temporal at "+mtlsAddr) || !strings.Contains(string(log), "certificate") {
		t.Errorf("the refused worker's log does not say why it stopped:\n%s", tailBytes(log, 2048))
	}
	t.Logf("refused worker: %s", tailBytes(log, 600))
}
