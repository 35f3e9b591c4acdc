package source

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
)

// TestChunkReadSpeed compares the two ways a backfill reads a chunk into Arrow, alternated
// under one snapshot: the query protocol (ScanChunk, the builder's binary formats) and a binary
// COPY (CopyChunk), on the benchmark's orders table. It measures, so it runs only when
// SLUICE_READ_SPEED_ROWS gives the table's rows (go test -run TestChunkReadSpeed -v ./source).
func TestChunkReadSpeed(t *testing.T) {
	rows, _ := strconv.Atoi(os.Getenv("SLUICE_READ_SPEED_ROWS"))
	if rows <= 0 {
		t.Skip("set SLUICE_READ_SPEED_ROWS to measure")
	}
	db := newTestDB(t, `CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, amount numeric(12,2) NOT NULL,
		status text NOT NULL, note text, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL)`,
		`INSERT INTO orders SELECT g, g % 100000, round((g * 7.31)::numeric % 10000, 2), (ARRAY['new','paid','shipped','delivered'])[1 + g % 4],
		repeat('x', 100 + g % 50), now() - (g || ' seconds')::interval, now() FROM generate_series(1, `+strconv.Itoa(rows)+`) g`,
		"VACUUM ANALYZE orders")
	cfg := db.config(t, "orders")
	info := setup(t, cfg)
	schema := info.Schemas[0]
	ctx := context.Background()
	snap, err := OpenSnapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	const chunk = 100_000
	read := func(viaCopy bool) (time.Duration, time.Duration) {
		b, err := batch.NewRecordBuilder(memory.DefaultAllocator, schema)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		formats := b.BinaryFormats()
		var ru0, ru1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		start := time.Now()
		var after []batch.Value
		for {
			n := 0
			row := func(c *batch.Change, raw [][]byte) error {
				n++
				return b.AppendRow(c, raw, formats, start)
			}
			var last []batch.Value
			if viaCopy {
				last, err = snap.CopyChunk(ctx, schema, after, KeyRange{}, chunk, formats, row)
			} else {
				last, err = snap.ScanChunk(ctx, schema, after, chunk, formats, row)
			}
			if err != nil {
				t.Fatal(err)
			}
			b.NewRecord().Release()
			if n < chunk {
				break
			}
			after = last
		}
		wall := time.Since(start)
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
		return wall, cpu
	}
	for round := 1; round <= 3; round++ {
		for _, viaCopy := range []bool{false, true} {
			wall, cpu := read(viaCopy)
			t.Logf("round %d copy=%v: %d rows in %v (%.0f rows/s), worker CPU %v", round, viaCopy, rows, wall.Round(time.Millisecond),
				float64(rows)/wall.Seconds(), cpu.Round(time.Millisecond))
		}
	}
}
