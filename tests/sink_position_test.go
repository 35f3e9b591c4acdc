package tests

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// sinkKind is one sink the multi-sink tests run against; dest makes a fresh destination of the
// test's own on the shared service.
type sinkKind struct {
	name string
	dest func(t *testing.T) destination
}

// everySink is the one table of the sinks every multi-sink test (issue 8's faults among them)
// runs against: the local Iceberg warehouse, a fresh database of the shared ClickHouse and a
// fresh scope of the shared gocaves.
func everySink() []sinkKind {
	return []sinkKind{
		{"iceberg", icebergDestination},
		{"clickhouse", clickhouseDestination},
		{"couchbase", couchbaseDestination},
	}
}

// open is a pipeline of public.items (o.Sink and o.Tables are set here) into a fresh
// destination of the sink.
func (k sinkKind) open(t *testing.T, o pipelineOptions) *sinkTarget {
	t.Helper()
	return itemsTarget(t, o, k.dest(t))
}

// destination is one sink destination of a test's own: the sink section pipelines write into
// it with, how a source table's target is named in it, and how a target is read back as a user
// of the sink sees it. universe names every key the source table ever held: a key-value store
// cannot be listed without the query service, so the Couchbase reader gets each key (the other
// sinks list their rows and ignore it).
type destination struct {
	yaml   string                                                                         // YAML under sink:, indented by two spaces
	target func(table string) string                                                      // target of source table public.<table>
	items  []string                                                                       // the columns of public.items (itemColumns) the reader shows
	read   func(p *icebergPipeline, target string, columns, universe []string) sinkReader // target's visible rows over columns (a subset of items)
}

// icebergDestination is a local Iceberg warehouse with a SQLite catalog in the test's temp dir.
func icebergDestination(t *testing.T) destination {
	dir := t.TempDir()
	return icebergDestinationOf(fmt.Sprintf("  type: iceberg\n  iceberg:\n    catalog:\n      type: sql\n      dialect: sqlite\n      uri: %s\n    warehouse: %s",
		filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")))
}

// icebergDestinationOf is the Iceberg warehouse of the sink section sinkYAML; its reader shows
// every column.
func icebergDestinationOf(sinkYAML string) destination {
	return destination{
		yaml:   sinkYAML,
		target: func(table string) string { return "raw." + table },
		items:  itemColumns,
		read: func(p *icebergPipeline, target string, columns, _ []string) sinkReader {
			return icebergColumnsReader(p, target, columns)
		},
	}
}

// clickhouseDestination is a fresh database of the shared ClickHouse, dropped at cleanup.
func clickhouseDestination(t *testing.T) destination {
	return clickhouseDestinationAt(t, testenv.ClickHouse(t))
}

// clickhouseDestinationAt is a fresh database of the ClickHouse at addr, dropped at cleanup; its
// reader shows e2eColumns.
func clickhouseDestinationAt(t *testing.T, addr string) destination {
	db := testenv.RandomName("sluice_fault_")
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.Native, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db); _ = conn.Close() })
	return destination{
		yaml:   fmt.Sprintf("  type: clickhouse\n  clickhouse:\n    addr: %s\n    database: %s", addr, db),
		target: func(table string) string { return table },
		items:  e2eColumns,
		read: func(_ *icebergPipeline, target string, columns, _ []string) sinkReader {
			return clickhouseColumns(conn, db+"."+target, columns)
		},
	}
}

// couchbaseDestination is a scope of the test's own in the shared gocaves bucket.
func couchbaseDestination(t *testing.T) destination {
	return couchbaseDestinationOn(t, testenv.Couchbase(t))
}

// couchbaseDestinationOn is a scope of the test's own in cb's bucket; its reader shows
// e2eColumns.
func couchbaseDestinationOn(t *testing.T, cb testenv.CouchbaseInfo) destination {
	scope := testenv.RandomName("fault")
	bucket := couchbaseBucket(t, cb)
	return destination{
		yaml:   couchbaseYAML(cb),
		target: func(table string) string { return scope + "." + table },
		items:  e2eColumns,
		read: func(_ *icebergPipeline, target string, columns, universe []string) sinkReader {
			return couchbaseColumns(bucket.Scope(scope).Collection(strings.TrimPrefix(target, scope+".")), universe, columns)
		},
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
