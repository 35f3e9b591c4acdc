package clickhouse

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestNativeInsertStoresWhatSlicesStored: on the test server (the compatible layout), a batch
// of every type (keys, Nullable columns, arrays, every context column, the marker row) written
// by Apply is stored exactly as the same batch inserted from the per-row slices the sink used
// to hand the driver: the server's block header names each column with the type the sink
// writes, and every stored value matches.
func TestNativeInsertStoresWhatSlicesStored(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs ClickHouse")
	}
	ctx := t.Context()
	db := testenv.RandomName("sluice_test_")
	s, err := New(ctx, Config{Addr: testenv.ClickHouse(t), Database: db, ReadTimeout: config.Duration(time.Minute),
		DialTimeout: config.Duration(2 * time.Second)}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+quote(db))
		_ = s.Close(ctx)
	})
	native, slices := allTypesSpecFor(s.Modern()), allTypesSpecFor(s.Modern())
	native.Target, slices.Target = "native", "slices"
	for _, spec := range []sinks.TableSpec{native, slices} {
		if err := s.EnsureTable(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	changes := allTypesChanges(700, false)
	rec := buildRecord(t, native, changes)
	last := changes[len(changes)-1].Pos
	lo := batch.SourcePosition{Source: sinktest.Source, Position: changes[0].Pos}
	hi := batch.SourcePosition{Source: sinktest.Source, Position: last}
	if err := s.Apply(ctx, sinks.Batch{Spec: native, Phase: batch.PhaseStream, Record: rec, Lo: lo, Hi: hi}); err != nil {
		t.Fatalf("Apply: %v", err)
	}

	l, ok, err := s.layoutOf(ctx, slices)
	if err != nil || !ok || l.modern {
		t.Fatalf("layout of %s: %v %v (modern %v)", slices.Target, ok, err, ok && l.modern)
	}
	cv, err := l.converter(rec, hi, true)
	if err != nil {
		t.Fatal(err)
	}
	bt, err := s.conn.PrepareBatch(ctx, l.insertSQL())
	if err != nil {
		t.Fatal(err)
	}
	for i := range l.cols {
		v, err := oldColumn(cv, i)
		if err != nil {
			t.Fatal(err)
		}
		if err := bt.Column(i).Append(v); err != nil {
			t.Fatalf("column %s: %v", l.cols[i].name, err)
		}
	}
	if err := bt.Send(); err != nil {
		t.Fatal(err)
	}

	want, got := dumpTable(t, s.conn, db, slices.Target), dumpTable(t, s.conn, db, native.Target)
	if len(want) != len(changes)+1 || len(got) != len(want) {
		t.Fatalf("stored %d rows from the slices and %d from Apply, want %d", len(want), len(got), len(changes)+1)
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("row %d differs:\nslices: %s\nnative: %s", i, want[i], got[i])
		}
	}
}

// dumpTable returns every row of db.table as text, in insert order (_version, then the key).
func dumpTable(t *testing.T, conn driver.Conn, db, table string) []string {
	t.Helper()
	rows, err := conn.Query(t.Context(), fmt.Sprintf("SELECT * FROM %s.%s ORDER BY _version, k_big, _sluice_marker", quote(db), quote(table)))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	var out []string
	for rows.Next() {
		vals := make([]any, len(types))
		for i, ct := range types {
			vals[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		shown := make([]string, len(vals))
		for i, v := range vals {
			shown[i] = types[i].Name() + "=" + show(reflect.ValueOf(v).Elem())
		}
		out = append(out, strings.Join(shown, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// show prints a scanned value, following pointers (NULL for nil) and into slices.
func show(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "NULL"
		}
		return show(v.Elem())
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = show(v.Index(i))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprint(v.Interface())
}
