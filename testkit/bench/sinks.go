package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/apache/arrow-go/v18/arrow/array"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/sinks/iceberg"
)

// Probe tells how far the latency table's rows are visible in a sink: the largest id such that
// every row up to it can be read. The latency writer inserts ids in increasing order from one
// connection and batches commit in order, so the visible rows are a prefix of the ids.
type Probe interface {
	// MaxVisible returns the largest visible id, at least after and at most limit.
	MaxVisible(ctx context.Context, after, limit int64) (int64, error)
	Close()
}

// SinkTarget is one sink the benchmark writes into: its config section, targets, a probe and
// the cleanup of what the run wrote.
type SinkTarget struct {
	Kind          string // iceberg, clickhouse or couchbase
	SinkYAML      string
	OrdersTarget  string
	LatencyTarget string
	// OpenProbe opens a probe of the latency target for the pipeline's loaded config.
	OpenProbe func(ctx context.Context, cfg *config.Config) (Probe, error)
	// Cleanup drops what the run wrote into the sink (best effort).
	Cleanup func(ctx context.Context)
}

// IcebergTarget writes into a local warehouse with a sqlite catalog under dir.
func IcebergTarget(dir string) SinkTarget {
	return SinkTarget{
		Kind: "iceberg",
		SinkYAML: fmt.Sprintf("  type: iceberg\n  iceberg:\n    catalog:\n      type: sql\n      dialect: sqlite\n      uri: %s\n    warehouse: %s",
			filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")),
		OrdersTarget: "bench.orders", LatencyTarget: "bench.latency",
		OpenProbe: func(ctx context.Context, cfg *config.Config) (Probe, error) {
			s, err := pipeline.Open(ctx, cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				return nil, err
			}
			sink, ok := s.(*iceberg.Sink)
			if !ok {
				_ = s.Close(ctx)
				return nil, fmt.Errorf("sink %s is not iceberg", cfg.Sink.Type)
			}
			return &icebergProbe{sink: sink}, nil
		},
		Cleanup: func(context.Context) {
			_ = os.RemoveAll(filepath.Join(dir, "warehouse"))
			_ = os.Remove(filepath.Join(dir, "catalog.db"))
		},
	}
}

type icebergProbe struct {
	sink     *iceberg.Sink
	metadata string // metadata location of the last scan
	last     int64
}

func (p *icebergProbe) MaxVisible(ctx context.Context, after, limit int64) (int64, error) {
	tbl, err := p.sink.Catalog().LoadTable(ctx, table.Identifier{"bench", "latency"})
	if err != nil {
		if strings.Contains(err.Error(), "no such table") || strings.Contains(err.Error(), "not found") {
			return after, nil
		}
		return after, fmt.Errorf("loading bench.latency: %w", err)
	}
	if tbl.MetadataLocation() == p.metadata {
		return max(after, p.last), nil
	}
	_, itr, err := tbl.Scan(table.WithSelectedFields("id"),
		table.WithRowFilter(iceberggo.GreaterThan(iceberggo.Reference("id"), after))).ToArrowRecords(ctx)
	if err != nil {
		return after, fmt.Errorf("scanning bench.latency: %w", err)
	}
	best := after
	for rec, err := range itr {
		if err != nil {
			return after, fmt.Errorf("scanning bench.latency: %w", err)
		}
		if col, ok := rec.Column(0).(*array.Int64); ok {
			for i := 0; i < col.Len(); i++ {
				if !col.IsNull(i) && col.Value(i) > best {
					best = col.Value(i)
				}
			}
		}
		rec.Release()
	}
	p.metadata, p.last = tbl.MetadataLocation(), best
	return min(best, limit), nil
}

func (p *icebergProbe) Close() { _ = p.sink.Close(context.Background()) }

// ClickHouseTarget writes into database db of the ClickHouse server at addr.
func ClickHouseTarget(addr, db string) SinkTarget {
	open := func() (clickhouse.Conn, error) {
		return clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.Native, DialTimeout: 5 * time.Second})
	}
	return SinkTarget{
		Kind:         "clickhouse",
		SinkYAML:     fmt.Sprintf("  type: clickhouse\n  clickhouse:\n    addr: %s\n    database: %s", addr, db),
		OrdersTarget: "orders", LatencyTarget: "latency",
		OpenProbe: func(ctx context.Context, _ *config.Config) (Probe, error) {
			conn, err := open()
			if err != nil {
				return nil, fmt.Errorf("connecting to ClickHouse at %s: %w", addr, err)
			}
			return &clickhouseProbe{conn: conn, query: "SELECT toInt64(max(id)) FROM " + db + ".latency"}, nil
		},
		Cleanup: func(ctx context.Context) {
			if conn, err := open(); err == nil {
				_ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db)
				_ = conn.Close()
			}
		},
	}
}

type clickhouseProbe struct {
	conn  clickhouse.Conn
	query string
}

func (p *clickhouseProbe) MaxVisible(ctx context.Context, after, limit int64) (int64, error) {
	var m int64
	if err := p.conn.QueryRow(ctx, p.query).Scan(&m); err != nil {
		if strings.Contains(err.Error(), "doesn't exist") || strings.Contains(err.Error(), "UNKNOWN_TABLE") {
			return after, nil
		}
		return after, err
	}
	return min(max(m, after), limit), nil
}

func (p *clickhouseProbe) Close() { _ = p.conn.Close() }

// CouchbaseTarget writes into scope of bucket on the cluster at connstr.
func CouchbaseTarget(connstr, user, password, bucket, scope string) SinkTarget {
	connect := func() (*gocb.Cluster, *gocb.Bucket, error) {
		cluster, err := gocb.Connect(connstr, gocb.ClusterOptions{
			Authenticator: gocb.PasswordAuthenticator{Username: user, Password: password}})
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to Couchbase at %s: %w", connstr, err)
		}
		b := cluster.Bucket(bucket)
		if err := b.WaitUntilReady(30*time.Second, nil); err != nil {
			_ = cluster.Close(nil)
			return nil, nil, fmt.Errorf("opening bucket %s: %w", bucket, err)
		}
		return cluster, b, nil
	}
	return SinkTarget{
		Kind: "couchbase",
		SinkYAML: fmt.Sprintf("  type: couchbase\n  couchbase:\n    connstr: %s\n    username: %s\n    password: %s\n    bucket: %s",
			connstr, user, password, bucket),
		OrdersTarget: scope + ".orders", LatencyTarget: scope + ".latency",
		OpenProbe: func(context.Context, *config.Config) (Probe, error) {
			cluster, b, err := connect()
			if err != nil {
				return nil, err
			}
			return &couchbaseProbe{cluster: cluster, col: b.Scope(scope).Collection("latency")}, nil
		},
		Cleanup: func(context.Context) {
			if cluster, b, err := connect(); err == nil {
				_ = b.CollectionsV2().DropScope(scope, nil)
				_ = cluster.Close(nil)
			}
		},
	}
}

type couchbaseProbe struct {
	cluster *gocb.Cluster
	col     *gocb.Collection
}

// MaxVisible gallops from after+1 until a missing id, then bisects: O(log n) reads per poll.
func (p *couchbaseProbe) MaxVisible(ctx context.Context, after, limit int64) (int64, error) {
	exists := func(id int64) (bool, error) {
		_, err := p.col.Get(strconv.FormatInt(id, 10), &gocb.GetOptions{Context: ctx})
		if errors.Is(err, gocb.ErrDocumentNotFound) || errors.Is(err, gocb.ErrCollectionNotFound) || errors.Is(err, gocb.ErrScopeNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	lo := after // visible
	hi := int64(-1)
	for step := int64(1); ; step *= 2 {
		next := min(lo+step, limit)
		if next <= lo {
			return lo, nil
		}
		ok, err := exists(next)
		if err != nil {
			return after, err
		}
		if !ok {
			hi = next
			break
		}
		lo = next
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := exists(mid)
		if err != nil {
			return after, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

func (p *couchbaseProbe) Close() { _ = p.cluster.Close(nil) }
