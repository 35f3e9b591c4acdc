package bench

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The baselines are what a user would write by hand instead of Sluice, measured in the same run
// on the same public.orders: Sluice's backfill is reported as a ratio to them beside its ratio to
// COPY binary.

// ClickHouseBaselineOptions say where the ClickHouse baseline reads and writes.
type ClickHouseBaselineOptions struct {
	Psql, DSN string // psql and the source database
	// Client is clickhouse-client; Local, when set, is clickhouse-local (for the Native format).
	Client, Local string
	Host, Port    string
	Database      string
	Rows          int64
	Limit1        string // the COPY binary result, for the ratio
}

// chFormat is one way of piping Postgres' output into clickhouse-client.
type chFormat struct {
	name, copy, insert string
	native             bool // through clickhouse-local, which turns the CSV into Native
}

// chPipe is the shell pipeline of a load; its parts come from the environment (chFormat.env), so
// that nothing in them is read by the shell.
const chPipe = `set -o pipefail; "$BENCH_PSQL" -X -q -v ON_ERROR_STOP=1 -d "$BENCH_DSN" -c "$BENCH_COPY" | ` +
	`"$BENCH_CLIENT" --host "$BENCH_HOST" --port "$BENCH_PORT" --query "$BENCH_INSERT"`

// chNativePipe is chPipe with clickhouse-local between psql and the client.
const chNativePipe = `set -o pipefail; "$BENCH_PSQL" -X -q -v ON_ERROR_STOP=1 -d "$BENCH_DSN" -c "$BENCH_COPY" | ` +
	`"$BENCH_LOCAL" --structure "$BENCH_STRUCTURE" --input-format CSV --query "SELECT * FROM table FORMAT Native" | ` +
	`"$BENCH_CLIENT" --host "$BENCH_HOST" --port "$BENCH_PORT" --query "$BENCH_INSERT"`

// ordersSelect is public.orders as ClickHouse reads it: timestamps in UTC without a zone (18.16
// parses "YYYY-MM-DD hh:mm:ss" only).
const ordersSelect = `SELECT id, customer_id, amount, status, note, created_at AT TIME ZONE 'UTC', updated_at AT TIME ZONE 'UTC' FROM public.orders`

// ordersClickHouseColumns is the structure of the baseline's table: the same columns and types
// the sink writes for public.orders, in a plain MergeTree (the best case for a bulk load).
const ordersClickHouseColumns = "id Int64, customer_id Int32, amount Decimal(12, 2), status String, note Nullable(String), created_at DateTime, updated_at DateTime"

// ClickHouseBaseline loads public.orders into ClickHouse the way a user would by hand, `COPY ...
// TO STDOUT` piped from psql into clickhouse-client, once per format (TSV, CSV, and Native through
// clickhouse-local when it is installed), and returns the fastest with the others in its note.
func ClickHouseBaseline(ctx context.Context, o ClickHouseBaselineOptions) (Result, error) {
	formats := []chFormat{
		{name: "TSV", copy: "", insert: "TabSeparated"},
		{name: "CSV", copy: " (FORMAT csv)", insert: "CSV"},
	}
	skipped := "Native: not tried (no clickhouse-local to turn Postgres' output into it)"
	if o.Local != "" {
		formats = append(formats, chFormat{name: "Native", copy: " (FORMAT csv)", insert: "Native", native: true})
		skipped = ""
	}
	tbl := o.Database + ".orders_baseline"
	var (
		best  Result
		tried []string
	)
	for _, f := range formats {
		for _, q := range []string{"CREATE DATABASE IF NOT EXISTS " + o.Database, "DROP TABLE IF EXISTS " + tbl,
			"CREATE TABLE " + tbl + " (" + ordersClickHouseColumns + ") ENGINE = MergeTree() ORDER BY id"} {
			if _, err := o.client(ctx, q); err != nil {
				return Result{}, err
			}
		}
		pipe := chPipe
		if f.native {
			pipe = chNativePipe
		}
		cmd := exec.CommandContext(ctx, "bash", "-c", pipe)
		cmd.Env = append(os.Environ(), "BENCH_PSQL="+o.Psql, "BENCH_DSN="+o.DSN, "BENCH_COPY=COPY ("+ordersSelect+") TO STDOUT"+f.copy,
			"BENCH_CLIENT="+o.Client, "BENCH_HOST="+o.Host, "BENCH_PORT="+o.Port, "BENCH_INSERT=INSERT INTO "+tbl+" FORMAT "+f.insert,
			"BENCH_LOCAL="+o.Local, "BENCH_STRUCTURE="+ordersClickHouseColumns)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		elapsed := time.Since(start)
		if err != nil {
			return Result{}, fmt.Errorf("loading public.orders into ClickHouse as %s: %w: %s", f.name, err, out)
		}
		count, err := o.client(ctx, "SELECT count() FROM "+tbl)
		if err != nil {
			return Result{}, err
		}
		if n, _ := strconv.ParseInt(count, 10, 64); n != o.Rows {
			return Result{}, fmt.Errorf("ClickHouse baseline as %s: %s rows loaded, want %d", f.name, count, o.Rows)
		}
		r := Result{Name: "baseline: psql COPY piped into clickhouse-client, " + f.name, Rows: o.Rows, Elapsed: elapsed,
			Sink: "clickhouse", Kind: KindBaseline, Limit: o.Limit1}
		tried = append(tried, fmt.Sprintf("%s %.0f rows/s", f.name, r.RowsPerSec()))
		if best.Elapsed == 0 || r.Elapsed < best.Elapsed {
			best = r
		}
	}
	_, _ = o.client(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+tbl)
	best.Name = strings.Replace(best.Name, "clickhouse-client, ", "clickhouse-client (fastest format), ", 1)
	best.Note = "into a plain MergeTree; tried " + strings.Join(tried, ", ")
	if skipped != "" {
		best.Note += "; " + skipped
	}
	return best, nil
}

// client runs one query with clickhouse-client and returns its trimmed output.
func (o ClickHouseBaselineOptions) client(ctx context.Context, query string) (string, error) {
	out, err := exec.CommandContext(ctx, o.Client, "--host", o.Host, "--port", o.Port, "--query", query).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("clickhouse-client %q: %w: %s", query, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// IcebergBaselineOptions say what the Iceberg baseline reads and where it writes.
type IcebergBaselineOptions struct {
	Dir string // directory of the Parquet files (read-and-write.parquet, write-only.parquet): the caller removes it
	// CompressionLevel is the sink's zstd level (sink.iceberg.compression_level).
	CompressionLevel int
	ChunkRows        int // rows per Arrow record, as the backfill's chunks
	Limit1           string
}

// ordersArrow is public.orders as the sink maps it to Arrow.
func ordersArrow() *arrow.Schema {
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "customer_id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}},
		{Name: "status", Type: arrow.BinaryTypes.String},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "created_at", Type: ts},
		{Name: "updated_at", Type: ts},
	}, nil)
}

// parquetProps are the Parquet writer settings iceberg-go v0.7.0 uses for the sink's tables:
// its defaults (row group limit, page size and row limit, dictionary size, data page v2, dictionary
// cost fallback on every column) with the sink's zstd level.
func parquetProps(schema *arrow.Schema, level int) *parquet.WriterProperties {
	props := []parquet.WriterProperty{
		parquet.WithMaxRowGroupLength(table.ParquetRowGroupLimitDefault),
		parquet.WithDataPageSize(table.ParquetPageSizeBytesDefault),
		parquet.WithDataPageVersion(parquet.DataPageV2),
		parquet.WithBatchSize(table.ParquetPageRowLimitDefault),
		parquet.WithDictionaryPageSizeLimit(table.ParquetDictSizeBytesDefault),
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(level),
		parquet.WithDictionaryDefault(true),
	}
	for _, f := range schema.Fields() {
		props = append(props, parquet.WithDictionaryCostFallbackFor(f.Name, true))
	}
	return parquet.NewWriterProperties(props...)
}

// IcebergBaselines write public.orders as Parquet with arrow-go alone (no catalog, no Iceberg
// metadata), with the sink's writer settings: first read with pgx and written as the rows arrive
// (what a hand-written loader does), then written again from the records already in memory
// (the Parquet writing alone). It returns both.
func IcebergBaselines(ctx context.Context, conn *pgx.Conn, o IcebergBaselineOptions) ([]Result, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", o.Dir, err)
	}
	schema := ordersArrow()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()

	start := time.Now()
	w, f, err := newParquetFile(filepath.Join(o.Dir, "read-and-write.parquet"), schema, o.CompressionLevel)
	if err != nil {
		return nil, err
	}
	rows, err := readOrders(ctx, conn, schema, max(o.ChunkRows, 1), func(rec arrow.RecordBatch) error {
		recs = append(recs, rec)
		return w.WriteBuffered(rec)
	})
	if err == nil {
		err = w.Close()
	}
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("writing public.orders as Parquet: %w", err)
	}
	both := Result{Name: "baseline: pgx read + arrow-go Parquet write", Rows: rows, Elapsed: time.Since(start),
		Sink: "iceberg", Kind: KindBaseline, Limit: o.Limit1, Note: fileNote(f.Name())}

	start = time.Now()
	w, f, err = newParquetFile(filepath.Join(o.Dir, "write-only.parquet"), schema, o.CompressionLevel)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if err = w.WriteBuffered(rec); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Close()
	}
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("writing public.orders as Parquet from memory: %w", err)
	}
	write := Result{Name: "baseline: arrow-go Parquet write only (rows already in Arrow)", Rows: rows, Elapsed: time.Since(start),
		Sink: "iceberg", Kind: KindBaseline, Limit: o.Limit1, Note: fileNote(f.Name())}
	return []Result{both, write}, nil
}

func fileNote(path string) string {
	note := "one file, zstd, the sink's writer settings, no catalog"
	if st, err := os.Stat(path); err == nil {
		note += fmt.Sprintf(", %.1f MB", float64(st.Size())/1e6)
	}
	return note
}

func newParquetFile(path string, schema *arrow.Schema, level int) (*pqarrow.FileWriter, *os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("creating %s: %w", path, err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, parquetProps(schema, level),
		pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(memory.DefaultAllocator), pqarrow.WithStoreSchema()))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("opening a Parquet writer on %s: %w", path, err)
	}
	return w, f, nil
}

// readOrders reads public.orders with pgx (binary results) into records of chunk rows, handing
// each to emit, which owns it; it returns the rows read.
func readOrders(ctx context.Context, conn *pgx.Conn, schema *arrow.Schema, chunk int, emit func(arrow.RecordBatch) error) (int64, error) {
	rows, err := conn.Query(ctx, "SELECT id, customer_id, amount, status, note, created_at, updated_at FROM public.orders")
	if err != nil {
		return 0, fmt.Errorf("reading public.orders: %w", err)
	}
	defer rows.Close()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	var (
		id, n    int64
		customer int32
		amount   pgtype.Numeric
		status   string
		note     pgtype.Text
		created  time.Time
		updated  time.Time
		inChunk  int
		scaled   big.Int
	)
	flush := func() error {
		if inChunk == 0 {
			return nil
		}
		inChunk = 0
		return emit(b.NewRecordBatch())
	}
	for rows.Next() {
		if err := rows.Scan(&id, &customer, &amount, &status, &note, &created, &updated); err != nil {
			return n, fmt.Errorf("scanning public.orders: %w", err)
		}
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.Int32Builder).Append(customer)
		b.Field(2).(*array.Decimal128Builder).Append(decimalAt2(&scaled, amount))
		b.Field(3).(*array.StringBuilder).Append(status)
		if note.Valid {
			b.Field(4).(*array.StringBuilder).Append(note.String)
		} else {
			b.Field(4).AppendNull()
		}
		b.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(created.UnixMicro()))
		b.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(updated.UnixMicro()))
		n++
		if inChunk++; inChunk == chunk {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("reading public.orders: %w", err)
	}
	return n, flush()
}

// decimalAt2 is a numeric at scale 2 (numeric(12,2)) as a decimal128.
func decimalAt2(scaled *big.Int, v pgtype.Numeric) decimal128.Num {
	if !v.Valid || v.Int == nil {
		return decimal128.Num{}
	}
	scaled.Set(v.Int)
	switch e := v.Exp + 2; {
	case e > 0:
		scaled.Mul(scaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(e)), nil))
	case e < 0:
		scaled.Quo(scaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-e)), nil))
	}
	return decimal128.FromBigInt(scaled)
}
