package tests

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/couchbase/gocb/v2"
	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"gocloud.dev/blob/s3blob"

	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestSmokePostgresLogicalSlot proves the harness's PostgreSQL decodes WAL: a logical slot is
// created and sees a committed insert.
func TestSmokePostgresLogicalSlot(t *testing.T) {
	defer parallel(t)()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, testenv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{
		"CREATE TABLE smoke (id int PRIMARY KEY, v text)",
		"CREATE PUBLICATION smoke_pub FOR TABLE smoke",
		"SELECT pg_create_logical_replication_slot('smoke_slot', 'pgoutput')",
		"INSERT INTO smoke VALUES (1, 'one'), (2, 'two')",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var inserts int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_logical_slot_peek_binary_changes('smoke_slot', NULL, NULL,
		'proto_version', '1', 'publication_names', 'smoke_pub') WHERE get_byte(data, 0) = ascii('I')`).Scan(&inserts)
	if err != nil {
		t.Fatal(err)
	}
	if inserts != 2 {
		t.Fatalf("slot decoded %d inserts, want 2", inserts)
	}
}

func smokeGreet(ctx context.Context, name string) (string, error) { return "hello " + name, nil }

func smokeWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, smokeGreet, name).Get(ctx, &out)
	return out, err
}

// TestSmokeTemporalWorkflow runs a trivial workflow with an activity on a worker against the
// dev server.
func TestSmokeTemporalWorkflow(t *testing.T) {
	defer parallel(t)()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(client.Options{HostPort: testenv.Temporal(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := testenv.RandomName("smoke-")
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(smokeWorkflow)
	w.RegisterActivity(smokeGreet)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, smokeWorkflow, "sluice")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got != "hello sluice" {
		t.Fatalf("workflow returned %q, want %q", got, "hello sluice")
	}
}

// TestSmokeClickHouse creates a table, inserts with a clickhouse-go batch and selects it back.
func TestSmokeClickHouse(t *testing.T) {
	defer parallel(t)()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{testenv.ClickHouse(t)}, Protocol: clickhouse.Native})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	db := testenv.RandomName("smoke_")
	if err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	if err := conn.Exec(ctx, "CREATE TABLE "+db+".t (id UInt64, name String) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".t (id, name)")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := uint64(1); i <= n; i++ {
		if err := b.Append(i, fmt.Sprintf("row-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	var count, sum uint64
	if err := conn.QueryRow(ctx, "SELECT count(), sum(id) FROM "+db+".t").Scan(&count, &sum); err != nil {
		t.Fatal(err)
	}
	if count != n || sum != n*(n+1)/2 {
		t.Fatalf("got count %d sum %d, want %d and %d", count, sum, n, n*(n+1)/2)
	}
	var name string
	if err := conn.QueryRow(ctx, "SELECT name FROM "+db+".t WHERE id = 42").Scan(&name); err != nil || name != "row-42" {
		t.Fatalf("row 42: got %q, %v", name, err)
	}
}

// TestSmokeCouchbase upserts, gets and removes a document on gocaves with gocb.
func TestSmokeCouchbase(t *testing.T) {
	defer parallel(t)()
	cb := testenv.Couchbase(t)
	cluster, err := gocb.Connect(cb.ConnString, gocb.ClusterOptions{
		Authenticator: gocb.PasswordAuthenticator{Username: cb.Username, Password: cb.Password},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close(nil)
	bucket := cluster.Bucket(cb.Bucket)
	if err := bucket.WaitUntilReady(30*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	col := bucket.DefaultCollection()
	key := testenv.RandomName("smoke::")
	type doc struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	if _, err := col.Upsert(key, doc{ID: 7, Name: "seven"}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := col.Get(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got doc
	if err := res.Content(&got); err != nil {
		t.Fatal(err)
	}
	if got != (doc{ID: 7, Name: "seven"}) {
		t.Fatalf("got %+v", got)
	}
	if _, err := col.Remove(key, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := col.Get(key, nil); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("get after remove: %v, want ErrDocumentNotFound", err)
	}
}

// TestSmokeS3 puts and gets an object through gocloud.dev/blob on the S3-compatible store.
func TestSmokeS3(t *testing.T) {
	defer parallel(t)()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s3i := testenv.S3(t)
	bucket, err := s3blob.OpenBucketV2(ctx, s3i.Client(), s3i.Bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	want := []byte("sluice staged batch")
	if err := bucket.WriteAll(ctx, "a/b/batch.arrow", want, nil); err != nil {
		t.Fatal(err)
	}
	got, err := bucket.ReadAll(ctx, "a/b/batch.arrow")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}
