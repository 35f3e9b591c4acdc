package tests

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// e2eColumns are the columns of public.items compared in every sink: all of them but the key
// (text, a nullable integer, numeric, a text array and timestamptz).
var e2eColumns = itemColumns

// sinkReader reads a target back as a user of the sink would see it.
type sinkReader func(ctx context.Context) (localrun.Table, error)

// clickhousePipeline is a pipeline into a fresh database of the shared ClickHouse, and its
// reader: SELECT ... FINAL with the tombstone filter.
func clickhousePipeline(t *testing.T, setupSQL ...string) (*icebergPipeline, sinkReader) {
	t.Helper()
	addr := testenv.ClickHouse(t)
	db := testenv.RandomName("sluice_e2e_")
	p := newPipeline(t, "", fmt.Sprintf("  type: clickhouse\n  clickhouse:\n    addr: %s\n    database: %s", addr, db),
		[]string{"public.items:items"}, setupSQL...)
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.Native, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db); _ = conn.Close() })
	return p, clickhouseColumns(conn, db+".items", e2eColumns)
}

// couchbasePipeline is a pipeline into a scope of its own on gocaves, and its reader, which
// gets the document of every key in universe (a key-value store cannot be listed without the
// query service, so the test names every key the source ever held).
func couchbasePipeline(t *testing.T, universe []string, setupSQL ...string) (*icebergPipeline, sinkReader) {
	t.Helper()
	cb := testenv.Couchbase(t)
	scope := testenv.RandomName("e2e")
	p := newPipeline(t, "", couchbaseYAML(cb), []string{"public.items:" + scope + ".items"}, setupSQL...)
	bucket := couchbaseBucket(t, cb)
	return p, readCouchbase(bucket, scope, "items", universe, e2eColumns)
}

// couchbaseYAML is the sink section of a pipeline into cb's bucket.
func couchbaseYAML(cb testenv.CouchbaseInfo) string {
	return fmt.Sprintf("  type: couchbase\n  couchbase:\n    connstr: %s\n    username: %s\n    password: %s\n    bucket: %s",
		cb.ConnString, cb.Username, cb.Password, cb.Bucket)
}

// couchbaseBucket connects to cb's bucket for reading the sink back, closed at cleanup.
func couchbaseBucket(t *testing.T, cb testenv.CouchbaseInfo) *gocb.Bucket {
	t.Helper()
	cluster, err := gocb.Connect(cb.ConnString, gocb.ClusterOptions{
		Authenticator: gocb.PasswordAuthenticator{Username: cb.Username, Password: cb.Password}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Close(nil) })
	bucket := cluster.Bucket(cb.Bucket)
	if err := bucket.WaitUntilReady(30*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	return bucket
}

// readCouchbase reads columns of the documents of every key in universe from scope.collection
// in the canonical text of ScanPostgres.
func readCouchbase(bucket *gocb.Bucket, scope, collection string, universe, columns []string) sinkReader {
	return couchbaseColumns(bucket.Scope(scope).Collection(collection), universe, columns)
}

// keys lists the ids of the inclusive ranges, as text.
func keys(ranges ...[2]int) []string {
	var out []string
	for _, r := range ranges {
		for id := r[0]; id <= r[1]; id++ {
			out = append(out, strconv.Itoa(id))
		}
	}
	return out
}

// runLivePipeline backfills, applies the live changes and waits until read shows the source.
func runLivePipeline(t *testing.T, p *icebergPipeline, read sinkReader) {
	t.Helper()
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	p.exec(liveItemChanges...)
	p.waitEqualTo("public.items", "id", e2eColumns, read)
}

// TestPipelineIntoClickHouse runs the pipeline into ClickHouse: backfill then stream, compared
// with SELECT ... FINAL and the tombstone filter.
func TestPipelineIntoClickHouse(t *testing.T) {
	defer parallel(t)()
	p, read := clickhousePipeline(t, itemsDDL, itemsSeed(1, 20000))
	runLivePipeline(t, p, read)
}

// TestPipelineIntoCouchbase runs the pipeline into Couchbase (gocaves): backfill then stream,
// compared document by document over every key the source ever held.
func TestPipelineIntoCouchbase(t *testing.T) {
	defer parallel(t)()
	p, read := couchbasePipeline(t, append(keys([2]int{1, 20000}, [2]int{200001, 200500}), "900000"), itemsDDL, itemsSeed(1, 20000))
	runLivePipeline(t, p, read)
}

// TestWorkerKilledMidCommitClickHouse is TestWorkerKilledMidCommitLosesNothing into ClickHouse.
func TestWorkerKilledMidCommitClickHouse(t *testing.T) {
	defer parallel(t)()
	p, read := clickhousePipeline(t, itemsDDL, itemsSeed(1, 20000))
	writeWhileKillingWorkers(t, p)
	p.waitEqualTo("public.items", "id", e2eColumns, read)
}

// TestWorkerKilledMidCommitCouchbase is TestWorkerKilledMidCommitLosesNothing into Couchbase.
func TestWorkerKilledMidCommitCouchbase(t *testing.T) {
	defer parallel(t)()
	p, read := couchbasePipeline(t, keys([2]int{1, 20000}, [2]int{killInsertFrom, killInsertTo}), itemsDDL, itemsSeed(1, 20000))
	writeWhileKillingWorkers(t, p)
	p.waitEqualTo("public.items", "id", e2eColumns, read)
}
