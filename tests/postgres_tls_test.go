package tests

import (
	"context"
	"net/url"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestPostgresVerifyFull runs a pipeline whose source is a Postgres serving TLS with a
// certificate of a CA the test makes, with sslmode=verify-full and sslrootcert naming that CA:
// the pipeline backfills and streams, sink equal to source, and every connection of the worker
// (the walsender included) is encrypted (pg_stat_ssl). With another CA, or a host name the
// certificate does not carry, `sluice check` fails with an error that names the verification
// failure.
func TestPostgresVerifyFull(t *testing.T) {
	defer parallel(t)()
	dir := t.TempDir()
	ca := testenv.NewCA(t, "sluice test CA")
	_, certPEM, keyPEM := ca.Issue(t, "db.test", false) // DNS db.test and IP 127.0.0.1
	certFile := testenv.WriteFile(t, dir, "server.pem", certPEM)
	keyFile := testenv.WriteFile(t, dir, "server-key.pem", keyPEM)
	caFile := testenv.WriteFile(t, dir, "ca.pem", ca.PEM)
	otherCA := testenv.WriteFile(t, dir, "other-ca.pem", testenv.NewCA(t, "another CA").PEM)
	serverOwns(t, dir, certFile, keyFile)

	pg := testenv.PrivatePostgres(t, "ssl=on", "ssl_cert_file="+certFile, "ssl_key_file="+keyFile)
	dsn := func(host, rootCert string) string {
		u, err := url.Parse(pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = host + ":" + u.Port()
		q := u.Query()
		q.Set("sslmode", "verify-full")
		q.Set("sslrootcert", rootCert)
		u.RawQuery = q.Encode()
		return u.String()
	}
	good := dsn("127.0.0.1", caFile)

	p := newPipelineWith(t, pipelineOptions{DSN: good, Tables: []string{"public.items:raw.items"}, SetupSQL: []string{itemsDDL, itemsSeed(1, 2000)}})
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	p.exec(itemsSeed(2001, 2300), `UPDATE public.items SET qty = qty + 1 WHERE id <= 50`, `DELETE FROM public.items WHERE id BETWEEN 60 AND 70`)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)

	// Every TCP connection to the server, the worker's walsender included, is encrypted.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var walsenders, plain int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE a.backend_type = 'walsender' AND s.ssl),
			count(*) FILTER (WHERE NOT s.ssl)
		FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.client_addr IS NOT NULL`).Scan(&walsenders, &plain); err != nil {
		t.Fatal(err)
	}
	if walsenders == 0 || plain != 0 {
		t.Fatalf("%d walsenders over TLS and %d unencrypted connections; want the worker's replication over TLS and nothing in plaintext", walsenders, plain)
	}

	// A wrong CA or a wrong host name: the setup check fails, naming the verification failure.
	refused := []struct{ name, dsn, want string }{
		{"another CA", dsn("127.0.0.1", otherCA), "x509: certificate signed by unknown authority"},
		{"a host the certificate does not name", dsn("localhost", caFile), "x509: certificate is valid for db.test, not localhost"},
	}
	for _, r := range refused {
		out, err := localrun.Sluice(ctx, bins.Starter, []string{"SLUICE_SOURCE_DSN=" + r.dsn}, "check", "--config", p.config)
		if err == nil {
			t.Errorf("%s: sluice check succeeded; want the server refused:\n%s", r.name, out)
			continue
		}
		if !strings.Contains(err.Error(), r.want) || !strings.Contains(err.Error(), "could not check the source") {
			t.Errorf("%s: sluice check failed without naming the verification failure (want %q):\n%v", r.name, r.want, err)
		}
	}
}

// serverOwns gives dir and files to the user PostgreSQL runs as (postgres, when the tests run as
// root: the server refuses a key file others can read, and reads only what it owns).
func serverOwns(t *testing.T, dir string, files ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Chown(f, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
}
