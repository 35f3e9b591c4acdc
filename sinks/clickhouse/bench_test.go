package clickhouse

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// benchOrdersSpec is the benchmark's public.orders (testkit/bench.CreateOrders): 7 columns, the
// shape of the reference table in ENVIRONMENT.md.
func benchOrdersSpec() sinks.TableSpec {
	return sinks.TableSpec{Target: "bench.orders", Schema: batch.Schema{
		Table: batch.TableName{Schema: "public", Name: "orders"},
		Columns: []batch.Column{
			{Name: "id", TypeOID: 20, TypeName: "bigint", TypeMod: -1, NotNull: true, Key: true},
			{Name: "customer_id", TypeOID: 23, TypeName: "integer", TypeMod: -1, NotNull: true},
			{Name: "amount", TypeOID: 1700, TypeName: "numeric(12,2)", TypeMod: numericMod(12, 2), NotNull: true},
			{Name: "status", TypeOID: 25, TypeName: "text", TypeMod: -1, NotNull: true},
			{Name: "note", TypeOID: 25, TypeName: "text", TypeMod: -1},
			{Name: "created_at", TypeOID: 1184, TypeName: "timestamp with time zone", TypeMod: -1, NotNull: true},
			{Name: "updated_at", TypeOID: 1184, TypeName: "timestamp with time zone", TypeMod: -1, NotNull: true},
		},
	}}
}

// benchOrdersChunk returns n snapshot rows of benchOrdersSpec's table with the values
// CreateOrders generates, as a backfill chunk reads them.
func benchOrdersChunk(n int) []batch.Change {
	statuses := []string{"new", "paid", "shipped", "delivered"}
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]batch.Change, n)
	for i := range n {
		g := int64(i + 1)
		amount := (g * 731) % 1000000 // round((g * 7.31) % 10000, 2) in cents
		ts := base.Add(time.Duration(g) * time.Second).Format("2006-01-02 15:04:05+00")
		out[i] = batch.Change{Op: batch.OpSnapshot, Pos: batch.Position{LSN: 0x16B3748}, Values: []batch.Value{
			{Text: []byte(strconv.FormatInt(g, 10))},
			{Text: []byte(strconv.FormatInt(g%100000, 10))},
			{Text: []byte(fmt.Sprintf("%d.%02d", amount/100, amount%100))},
			{Text: []byte(statuses[g%4])},
			{Text: []byte(strings.Repeat("x", 100+int(g%50)))},
			{Text: []byte(ts)},
			{Text: []byte(ts)},
		}}
	}
	return out
}

// BenchmarkConvertOrders measures turning a 100,000-row backfill chunk of the benchmark table
// (and a 100-row batch, a stream commit's size) into the driver's insert block, in both layouts:
// the per-row slices the driver converts again (the sink before) against the Native encoding
// decoded into the block's columns (the sink now). Sending the block costs the same either way
// and is not measured.
func BenchmarkConvertOrders(b *testing.B) {
	spec := benchOrdersSpec()
	for _, rows := range []int{100_000, 100} {
		rec := buildRecord(b, spec, benchOrdersChunk(rows))
		for _, modern := range []bool{false, true} {
			l, err := newLayout(spec, "bench", "orders", modern)
			if err != nil {
				b.Fatal(err)
			}
			for _, path := range []struct {
				name string
				fill func(tb testing.TB, cv *converter) error
			}{
				{"driver-slices", func(tb testing.TB, cv *converter) error { _, err := oldBlock(tb, cv); return err }},
				{"native", func(tb testing.TB, cv *converter) error { _, err := newNativeBlock(tb, cv); return err }},
			} {
				b.Run(fmt.Sprintf("rows=%d/modern=%v/%s", rows, modern, path.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						cv, err := l.converter(rec, batch.SourcePosition{}, false)
						if err != nil {
							b.Fatal(err)
						}
						if err := path.fill(b, cv); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
				})
			}
		}
	}
}

// BenchmarkInsertOrders measures the insert of a 100,000-row backfill chunk of the benchmark
// table into the test ClickHouse (the compatible layout on the dev stack's 18.16): conversion,
// sending and the server's write of one part, with the per-row slices against the Native
// encoding (the sink's insert).
func BenchmarkInsertOrders(b *testing.B) {
	if testing.Short() {
		b.Skip("needs ClickHouse")
	}
	const rows = 100_000
	ctx := b.Context()
	db := testenv.RandomName("sluice_bench_")
	s, err := New(ctx, Config{Addr: testenv.ClickHouse(b), Database: db, ReadTimeout: config.Duration(5 * time.Minute),
		DialTimeout: config.Duration(2 * time.Second)}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+quote(db))
		_ = s.Close(ctx)
	})
	spec := benchOrdersSpec()
	spec.Target = "orders"
	if err := s.EnsureTable(ctx, spec); err != nil {
		b.Fatal(err)
	}
	l, ok, err := s.layoutOf(ctx, spec)
	if err != nil || !ok {
		b.Fatalf("layout: %v %v", ok, err)
	}
	rec := buildRecord(b, spec, benchOrdersChunk(rows))
	oldInsert := func(cv *converter) error {
		bt, err := s.conn.PrepareBatch(ctx, l.insertSQL())
		if err != nil {
			return err
		}
		for i := range l.cols {
			v, err := oldColumn(cv, i)
			if err != nil {
				return err
			}
			if err := bt.Column(i).Append(v); err != nil {
				return err
			}
		}
		return bt.Send()
	}
	for _, path := range []struct {
		name   string
		insert func(cv *converter) error
	}{
		{"driver-slices", oldInsert},
		{"native", func(cv *converter) error { return s.insert(ctx, l, cv, rows) }},
	} {
		b.Run(fmt.Sprintf("modern=%v/%s", l.modern, path.name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				cv, err := l.converter(rec, batch.SourcePosition{}, false)
				if err != nil {
					b.Fatal(err)
				}
				if err := path.insert(cv); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
