package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestConformance runs the suite every sink passes, in a fresh database of the test server; the
// visible rows are SELECT ... FINAL with the tombstone filter.
func TestConformance(t *testing.T) {
	t.Parallel()
	addr := testenv.ClickHouse(t)
	db := testenv.RandomName("sluice_conf_")
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.Native, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+quote(db))
		_ = conn.Close()
	})
	sinktest.Run(t, sinktest.Harness{
		Open: func(t *testing.T) sinks.Sink {
			s, err := New(t.Context(), Config{Addr: addr, Database: db}, sinktest.Logger(t))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return s
		},
		Target: func(t *testing.T) string { return testenv.RandomName("t_") },
		Read: func(t *testing.T, _ sinks.Sink, spec sinks.TableSpec, _ []int64) map[int64]sinktest.Row {
			ctx := context.Background()
			var exists uint8
			if err := conn.QueryRow(ctx, "EXISTS TABLE "+quote(db)+"."+quote(spec.Target)).Scan(&exists); err != nil {
				t.Fatal(err)
			}
			out := map[int64]sinktest.Row{}
			if exists == 0 {
				return out
			}
			rows, err := conn.Query(ctx, fmt.Sprintf("SELECT id, name, qty FROM %s.%s FINAL WHERE _is_deleted = 0", quote(db), quote(spec.Target)))
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var (
					id   int64
					name *string
					qty  *int32
				)
				if err := rows.Scan(&id, &name, &qty); err != nil {
					t.Fatal(err)
				}
				if _, dup := out[id]; dup {
					t.Fatalf("id %d visible twice", id)
				}
				r := sinktest.Row{}
				if name != nil {
					r.Name = *name
				}
				if qty != nil {
					r.Qty = *qty
				}
				out[id] = r
			}
			if err := rows.Err(); err != nil && !strings.Contains(err.Error(), "EOF") {
				t.Fatal(err)
			}
			return out
		},
		Overtake: func(t *testing.T, s sinks.Sink, overtaken func(context.Context)) {
			var once sync.Once
			s.(*Sink).afterGuard = func(ctx context.Context) { once.Do(func() { overtaken(ctx) }) }
		},
		DropColumn: func(t *testing.T, _ sinks.Sink, spec sinks.TableSpec, column string) {
			if err := conn.Exec(t.Context(), "ALTER TABLE "+quote(db)+"."+quote(spec.Target)+" DROP COLUMN "+quote(column)); err != nil {
				t.Fatal(err)
			}
		},
		HasColumn: func(t *testing.T, _ sinks.Sink, spec sinks.TableSpec, column string) bool {
			var n uint64
			if err := conn.QueryRow(t.Context(), "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name = ?", db, spec.Target, column).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		},
	})
}
