package bench

import (
	"context"
	"math/big"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluicecdc/sluice/testkit/testenv"
)

func TestDecimalAt2(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   pgtype.Numeric
		want int64 // hundredths
	}{
		{name: "scale 2", in: pgtype.Numeric{Int: big.NewInt(1234), Exp: -2, Valid: true}, want: 1234},
		{name: "an integer", in: pgtype.Numeric{Int: big.NewInt(12), Exp: 0, Valid: true}, want: 1200},
		{name: "trailing zeros folded into the exponent", in: pgtype.Numeric{Int: big.NewInt(5), Exp: 1, Valid: true}, want: 5000},
		{name: "one decimal", in: pgtype.Numeric{Int: big.NewInt(-15), Exp: -1, Valid: true}, want: -150},
		{name: "more decimals than the scale", in: pgtype.Numeric{Int: big.NewInt(12345), Exp: -3, Valid: true}, want: 1234},
		{name: "null", in: pgtype.Numeric{}, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var scratch big.Int
			if got := decimalAt2(&scratch, tc.in); got.BigInt().Int64() != tc.want {
				t.Fatalf("decimalAt2 = %s, want %d hundredths", got.BigInt(), tc.want)
			}
		})
	}
}

// ordersDB is a fresh database with public.orders of n rows.
func ordersDB(t *testing.T, n int) (string, *pgx.Conn) {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if err := CreateOrders(ctx, conn, n); err != nil {
		t.Fatal(err)
	}
	return dsn, conn
}

// TestIcebergBaselines writes a small public.orders as Parquet both ways and reads it back.
func TestIcebergBaselines(t *testing.T) {
	t.Parallel()
	const n = 2500
	_, conn := ordersDB(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	res, err := IcebergBaselines(ctx, conn, IcebergBaselineOptions{Dir: dir, CompressionLevel: 1, ChunkRows: 1000, Limit1: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results, want 2 (read + write, write only)", len(res))
	}
	for _, r := range res {
		if r.Rows != n || r.Elapsed <= 0 || r.Kind != KindBaseline || r.Sink != "iceberg" || r.Limit != "copy" {
			t.Errorf("result %+v: want %d rows of an iceberg baseline against copy", r, n)
		}
	}
	for _, name := range []string{"read-and-write.parquet", "write-only.parquet"} {
		t.Run(name, func(t *testing.T) {
			rdr, err := file.OpenParquetFile(filepath.Join(dir, name), false)
			if err != nil {
				t.Fatal(err)
			}
			defer rdr.Close()
			fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			tbl, err := fr.ReadTable(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer tbl.Release()
			if tbl.NumRows() != n || tbl.NumCols() != int64(ordersArrow().NumFields()) {
				t.Fatalf("%d rows of %s, want %d of %s", tbl.NumRows(), tbl.Schema(), n, ordersArrow())
			}
			for i, f := range ordersArrow().Fields() {
				if got := tbl.Schema().Field(i); got.Name != f.Name || !arrow.TypeEqual(got.Type, f.Type) {
					t.Errorf("column %d is %s %s, want %s %s", i, got.Name, got.Type, f.Name, f.Type)
				}
			}
			// Row id 7 as Postgres has it: amount round(7 * 7.31, 2) = 51.17, created 2020-01-01 00:00:07 UTC.
			ids := tbl.Column(0).Data().Chunk(0).(*array.Int64)
			for i := 0; i < ids.Len(); i++ {
				if ids.Value(i) != 7 {
					continue
				}
				amount := tbl.Column(2).Data().Chunk(0).(*array.Decimal128).Value(i)
				created := tbl.Column(5).Data().Chunk(0).(*array.Timestamp).Value(i)
				if amount.BigInt().Int64() != 5117 || created != arrow.Timestamp(time.Date(2020, 1, 1, 0, 0, 7, 0, time.UTC).UnixMicro()) {
					t.Errorf("row 7: amount %s hundredths, created %v; want 5117 and 2020-01-01 00:00:07", amount.BigInt(), created.ToTime(arrow.Microsecond))
				}
				return
			}
			t.Error("row 7 is not in the file's first chunk")
		})
	}
}

// TestClickHouseBaseline loads a small public.orders into ClickHouse through psql and
// clickhouse-client in every format it tries.
func TestClickHouseBaseline(t *testing.T) {
	t.Parallel()
	client, err := exec.LookPath("clickhouse-client")
	if err != nil {
		t.Skip("no clickhouse-client:", err)
	}
	const n = 3000
	dsn, _ := ordersDB(t, n)
	host, port, err := net.SplitHostPort(testenv.ClickHouse(t))
	if err != nil {
		t.Fatal(err)
	}
	db := testenv.RandomName("bench_baseline_")
	o := ClickHouseBaselineOptions{Psql: filepath.Join(testenv.PostgresBin(t), "psql"), DSN: dsn, Client: client,
		Host: host, Port: port, Database: db, Rows: n, Limit1: "copy"}
	t.Cleanup(func() { _, _ = o.client(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := ClickHouseBaseline(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rows != n || r.Elapsed <= 0 || r.Sink != "clickhouse" || r.Kind != KindBaseline {
		t.Fatalf("result %+v: want %d rows of a clickhouse baseline", r, n)
	}
	for _, f := range []string{"TSV ", "CSV "} {
		if !strings.Contains(r.Note, "tried") || !strings.Contains(r.Note, f) {
			t.Errorf("note %q does not name format %s as tried", r.Note, f)
		}
	}
}
