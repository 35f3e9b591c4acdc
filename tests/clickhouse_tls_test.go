package tests

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/sluicecdc/sluice/config"
	chsink "github.com/sluicecdc/sluice/sinks/clickhouse"
	"github.com/sluicecdc/sluice/testkit/netfault"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestClickHouseOverTLS runs a pipeline into ClickHouse reached only through a TLS-terminating
// proxy (the devstack's ClickHouse 18.16 serves plaintext; the proxy stands in for its TLS
// port, as a load balancer that terminates TLS would) with a certificate of a CA the test makes,
// configured with sink.clickhouse.tls.ca_file and server_name: backfill and stream, sink equal
// to source. With another CA, or a name the certificate does not carry, the sink refuses the
// server with the verification failure; without TLS the proxy is not spoken to.
func TestClickHouseOverTLS(t *testing.T) {
	defer parallel(t)()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir()
	ca := testenv.NewCA(t, "sluice test CA")
	serverCert, _, _ := ca.Issue(t, "clickhouse.test", false)
	caFile := testenv.WriteFile(t, dir, "ca.pem", ca.PEM)
	otherCA := testenv.WriteFile(t, dir, "other-ca.pem", testenv.NewCA(t, "another CA").PEM)

	plain := testenv.ClickHouse(t)
	px, err := netfault.NewTLS(plain, &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = px.Serve(ctx) }()
	t.Cleanup(func() { _ = px.Close(); <-done })

	db := testenv.RandomName("sluice_tls_")
	p := newPipeline(t, "", fmt.Sprintf("  type: clickhouse\n  clickhouse:\n    addr: %s\n    database: %s\n    tls:\n      ca_file: %s\n      server_name: clickhouse.test",
		px.Addr(), db, caFile), []string{"public.items:items"}, itemsDDL, itemsSeed(1, 3000))
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{plain}, Protocol: clickhouse.Native, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db); _ = conn.Close() })
	runLivePipeline(t, p, clickhouseColumns(conn, db+".items", e2eColumns))
	if n := px.Stats().Accepted; n == 0 {
		t.Fatal("the sink never connected through the TLS proxy")
	}

	refused := []struct {
		name string
		tls  config.ClickHouseTLS
		want string
	}{
		{"another CA", config.ClickHouseTLS{TLS: config.TLS{CAFile: otherCA, ServerName: "clickhouse.test"}}, "x509: certificate signed by unknown authority"},
		{"a name the certificate does not carry", config.ClickHouseTLS{TLS: config.TLS{CAFile: caFile, ServerName: "clickhouse.internal"}},
			"x509: certificate is valid for clickhouse.test, not clickhouse.internal"},
		{"the system's roots", config.ClickHouseTLS{TLS: config.TLS{Enabled: true, ServerName: "clickhouse.test"}}, "x509: certificate signed by unknown authority"},
	}
	for _, r := range refused {
		c, cancel := context.WithTimeout(ctx, time.Minute)
		s, err := chsink.New(c, chsink.Config{Addr: px.Addr(), Database: db, DialTimeout: config.Duration(5 * time.Second), TLS: r.tls}, nil)
		cancel()
		if err == nil {
			_ = s.Close(ctx)
			t.Errorf("%s: the sink connected; want the server refused", r.name)
			continue
		}
		if !strings.Contains(err.Error(), r.want) || !strings.Contains(err.Error(), px.Addr()) {
			t.Errorf("%s: %v; want the address and %q", r.name, err, r.want)
		}
	}
}
