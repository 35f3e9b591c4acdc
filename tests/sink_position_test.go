package tests

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/localrun"
	"github.com/sluicecdc/sluice/internal/testenv"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/sinks"
)

// destination is one sink destination of a test's own: the sink section pipelines write into
// it with, how a source table's target is named in it, and how a target is read back as a user
// of the sink sees it (over e2eColumns, which are twoTableColumns too).
type destination struct {
	yaml   string                                             // YAML under sink:, indented by two spaces
	target func(table string) string                          // target of source table public.<table>
	read   func(p *icebergPipeline, target string) sinkReader // target's visible rows
}

// faultSink is one sink a fault test runs against. open makes a fresh destination on it;
// universe names every key the test's source tables ever hold (a key-value store cannot be
// listed without the query service, so the Couchbase reader gets each key).
type faultSink struct {
	name string
	open func(t *testing.T, universe []string) destination
}

// faultSinks are the three sinks every fault test runs against (issue 8).
func faultSinks() []faultSink {
	return []faultSink{
		{"iceberg", func(t *testing.T, _ []string) destination {
			dir := t.TempDir()
			return destination{
				yaml: fmt.Sprintf("  type: iceberg\n  iceberg:\n    catalog:\n      type: sql\n      dialect: sqlite\n      uri: %s\n    warehouse: %s",
					filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")),
				target: func(table string) string { return "raw." + table },
				read:   icebergReader,
			}
		}},
		{"clickhouse", func(t *testing.T, _ []string) destination {
			addr := testenv.ClickHouse(t)
			db := testenv.RandomName("sluice_fault_")
			conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.Native, DialTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db); _ = conn.Close() })
			return destination{
				yaml:   fmt.Sprintf("  type: clickhouse\n  clickhouse:\n    addr: %s\n    database: %s", addr, db),
				target: func(table string) string { return table },
				read: func(_ *icebergPipeline, target string) sinkReader {
					return func(ctx context.Context) (localrun.Table, error) { return readClickHouse(ctx, conn, db+"."+target) }
				},
			}
		}},
		{"couchbase", func(t *testing.T, universe []string) destination {
			cb := testenv.Couchbase(t)
			scope := testenv.RandomName("fault")
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
			return destination{
				yaml: fmt.Sprintf("  type: couchbase\n  couchbase:\n    connstr: %s\n    username: %s\n    password: %s\n    bucket: %s",
					cb.ConnString, cb.Username, cb.Password, cb.Bucket),
				target: func(table string) string { return scope + "." + table },
				read: func(_ *icebergPipeline, target string) sinkReader {
					return readCouchbase(bucket, scope, target[len(scope)+1:], universe)
				},
			}
		}},
	}
}

// openSink opens p's sink as an operator's tool would: pipeline.Open on the pipeline's config,
// the same destination the workers write. It is closed at cleanup.
func openSink(t *testing.T, p *icebergPipeline) sinks.Sink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pipeline.Open(ctx, p.cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("opening the %s sink: %v", p.cfg.Sink.Type, err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// sinkPositionOf reads the committed position s holds for target through the sink itself
// (Iceberg snapshot properties, ClickHouse marker rows, Couchbase checkpoint documents); ok is
// false when the target holds none.
func sinkPositionOf(t *testing.T, s sinks.Sink, target string) (batch.SourcePosition, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pos, ok, err := s.Position(ctx, sinks.TableSpec{Target: target})
	if err != nil {
		t.Fatalf("reading the committed position of %s: %v", target, err)
	}
	return pos, ok
}
