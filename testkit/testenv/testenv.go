// Package testenv gives tests real services started by the project's service manager
// (testkit/devstack): PostgreSQL with logical decoding, the Temporal dev server, ClickHouse,
// gocaves, SeaweedFS (S3 and an Iceberg REST catalog) and an in-process S3-compatible store.
// Each helper starts its service when it is not running, returns where to reach it, and fails
// the test with the reason when it cannot.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/testkit/devstack"
)

// startTimeout bounds starting one service, including waiting for another process that holds
// the stack lock while it starts services.
const startTimeout = 3 * time.Minute

func ensure(t testing.TB, service string) devstack.Info {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := devstack.New("", "", nil)
	if err != nil {
		t.Fatalf("testenv: %s: %v", service, err)
	}
	info, err := s.Ensure(ctx, service)
	if err != nil {
		t.Fatalf("testenv: %s cannot start: %v", service, err)
	}
	return info
}

// RandomName returns prefix followed by 8 random hex digits, for databases, tables and IDs that
// must not collide between tests.
func RandomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Postgres returns the DSN of the stack's PostgreSQL server (database postgres, superuser).
func Postgres(t testing.TB) string {
	t.Helper()
	return ensure(t, devstack.ServicePostgres).URL
}

// NewDatabase creates a fresh database and returns its DSN. At cleanup it drops the database and
// every replication slot in it.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := Postgres(t)
	name := RandomName("sluice_test_")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("testenv: connecting to PostgreSQL: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testenv: creating database %s: %v", name, err)
	}
	t.Cleanup(func() { dropDatabase(t, admin, name) })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("testenv: parsing DSN: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func dropDatabase(t testing.TB, admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Errorf("testenv: dropping database %s: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	// Walsenders hold slots; terminate them, then drop the slots, then the database.
	_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
		WHERE database = $1 AND active_pid IS NOT NULL`, name)
	for i := 0; i < 50; i++ {
		_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
			WHERE database = $1 AND NOT active`, name)
		var left int
		if err == nil {
			err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, name).Scan(&left)
		}
		if err == nil && left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Errorf("testenv: dropping database %s: %v", name, err)
	}
}

// PostgresBin returns the directory of the PostgreSQL binaries the stack runs (pg_recvlogical,
// pgbench, psql).
func PostgresBin(t testing.TB) string {
	t.Helper()
	return ensure(t, devstack.ServicePostgres).Extra["bin"]
}

// Temporal returns the host:port of the Temporal dev server's frontend (namespace "default",
// Sluice's search attributes registered).
func Temporal(t testing.TB) string {
	t.Helper()
	return ensure(t, devstack.ServiceTemporal).Addr
}

// ClickHouse returns the host:port of the ClickHouse server's native protocol (user default, no
// password).
func ClickHouse(t testing.TB) string {
	t.Helper()
	return ensure(t, devstack.ServiceClickHouse).Addr
}

// CouchbaseInfo is where to reach gocaves and with which credentials.
type CouchbaseInfo struct {
	ConnString string
	Username   string
	Password   string
	Bucket     string
}

// Couchbase returns how to reach gocaves, Couchbase's mock server.
func Couchbase(t testing.TB) CouchbaseInfo {
	t.Helper()
	info := ensure(t, devstack.ServiceCouchbase)
	return CouchbaseInfo{
		ConnString: info.URL,
		Username:   devstack.CouchbaseUser,
		Password:   devstack.CouchbasePassword,
		Bucket:     devstack.CouchbaseBucket,
	}
}

// PostgresServer is a PostgreSQL server a test started for itself.
type PostgresServer struct {
	DSN string // the postgres database, as superuser
	Log string // the server's log file
}

// PrivatePostgres starts a PostgreSQL server of the test's own, in a temporary directory on a
// free port, with the stack's settings overridden by settings ("name=value", e.g.
// "max_replication_slots=10"), and stops it at cleanup. It uses the same binaries as the shared
// server.
func PrivatePostgres(t testing.TB, settings ...string) PostgresServer {
	t.Helper()
	s, err := devstack.New(t.TempDir(), "", nil)
	if err != nil {
		t.Fatalf("testenv: private postgres: %v", err)
	}
	s.PostgresSettings = settings
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	info, err := s.Ensure(ctx, devstack.ServicePostgres)
	if err != nil {
		t.Fatalf("testenv: private postgres with %v cannot start: %v", settings, err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background(), devstack.ServicePostgres); err != nil {
			t.Errorf("testenv: stopping the private postgres: %v", err)
		}
	})
	return PostgresServer{DSN: info.URL, Log: info.Log}
}

// WeedInfo is where to reach the stack's SeaweedFS: its Iceberg REST catalog and S3 gateway, with
// the credentials both accept.
type WeedInfo struct {
	CatalogURI      string // the Iceberg REST catalog's base URL
	Warehouse       string // s3://<table bucket>: the catalog's warehouse
	Staging         string // a plain bucket, for staging
	S3Endpoint      string // the S3 gateway, http://127.0.0.1:port (path-style)
	Region          string
	AccessKeyID     string // also the catalog's OAuth2 client id
	SecretAccessKey string // also the catalog's OAuth2 client secret
}

// Credential is the catalog's OAuth2 client credential, client_id:client_secret.
func (w WeedInfo) Credential() string { return w.AccessKeyID + ":" + w.SecretAccessKey }

// Weed returns how to reach the stack's SeaweedFS (weed mini), S3 and Iceberg REST catalog in
// one process, both requiring credentials. Tests share its table bucket: each uses namespaces
// of its own.
func Weed(t testing.TB) WeedInfo {
	t.Helper()
	return weedInfo(ensure(t, devstack.ServiceWeed))
}

// VendingWeed starts a SeaweedFS of the test's own whose catalog vends table-scoped S3
// credentials (devstack's WeedVending), and stops it at cleanup.
func VendingWeed(t testing.TB) WeedInfo {
	t.Helper()
	s, err := devstack.New(t.TempDir(), "", nil)
	if err != nil {
		t.Fatalf("testenv: private weed: %v", err)
	}
	s.WeedVending = true
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	info, err := s.Ensure(ctx, devstack.ServiceWeed)
	if err != nil {
		t.Fatalf("testenv: private weed cannot start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background(), devstack.ServiceWeed); err != nil {
			t.Errorf("testenv: stopping the private weed: %v", err)
		}
	})
	return weedInfo(info)
}

func weedInfo(info devstack.Info) WeedInfo {
	return WeedInfo{
		CatalogURI:      info.URL,
		Warehouse:       "s3://" + info.Extra["table_bucket"],
		Staging:         info.Extra["bucket"],
		S3Endpoint:      info.Extra["s3_endpoint"],
		Region:          info.Extra["region"],
		AccessKeyID:     info.Extra["access_key_id"],
		SecretAccessKey: info.Extra["secret_access_key"],
	}
}
