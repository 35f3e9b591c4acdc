package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ClickHouseSink reads ClickHouse targets as their users query them: SELECT ... FINAL WHERE
// _is_deleted = 0 (the filter the compatible layout needs after FINAL; on the modern layout
// FINAL already hides tombstones and the filter changes nothing). Marker rows have
// _is_deleted 1 and are hidden the same way.
//
// Encodings it normalizes: bool is UInt8 on the compatible layout (1/0); bytea is a String of
// the raw bytes (read through hex()); decimals print without trailing zeros; timestamps are
// DateTime('UTC') on the compatible layout, whole seconds, so Expect truncates the source's
// value to seconds for columns of that type; a NULL array is stored as an empty array, so
// Expect maps a NULL array to [].
type ClickHouseSink struct {
	Conn     driver.Conn
	Database string
	// Target maps a workload table name to its ClickHouse table (in Database).
	Target func(table string) string

	mu      sync.Mutex
	seconds map[string]bool // column name -> stored as DateTime (whole seconds)
}

// Name implements Sink.
func (s *ClickHouseSink) Name() string { return "clickhouse" }

// Expect implements Sink: whole seconds for DateTime columns, [] for a NULL array.
func (s *ClickHouseSink) Expect(c Column, v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case c.Kind.IsArray() && v == Null:
		return "[]"
	case (c.Kind == Timestamp || c.Kind == Timestamptz) && s.seconds[c.Name]:
		return TruncateToSecond(v)
	}
	return v
}

// Read implements Sink.
func (s *ClickHouseSink) Read(ctx context.Context, t *Table, _ []Key) ([]Row, error) {
	target := s.Target(t.Name)
	if err := s.readTypes(ctx, target); err != nil {
		return nil, err
	}
	var exprs []string
	for _, c := range t.Columns {
		switch {
		case c.Kind.IsArray():
			exprs = append(exprs, c.Name)
		case c.Kind == Bytea:
			exprs = append(exprs, "isNull("+c.Name+")", "ifNull(lower(hex("+c.Name+")), '')")
		default:
			exprs = append(exprs, "isNull("+c.Name+")", "ifNull(toString("+c.Name+"), '')")
		}
	}
	rows, err := s.Conn.Query(ctx, fmt.Sprintf("SELECT %s FROM %s.%s FINAL WHERE _is_deleted = 0",
		strings.Join(exprs, ", "), s.Database, target))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", target, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var dest []any
		nulls := make([]uint8, len(t.Columns))
		texts := make([]string, len(t.Columns))
		ints := make([][]*int32, len(t.Columns))
		strs := make([][]*string, len(t.Columns))
		for i, c := range t.Columns {
			switch c.Kind {
			case Int4Array:
				dest = append(dest, &ints[i])
			case TextArray, IntervalArray:
				dest = append(dest, &strs[i])
			default:
				dest = append(dest, &nulls[i], &texts[i])
			}
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("reading %s: %w", target, err)
		}
		vals := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			var v any
			switch {
			case c.Kind == Int4Array:
				v = ints[i]
			case c.Kind == TextArray || c.Kind == IntervalArray:
				v = strs[i]
			case nulls[i] != 0:
				vals[i] = Null
				continue
			default:
				vals[i] = texts[i]
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", target, err)
			}
			vals[i] = string(b)
		}
		out = append(out, t.row(vals))
	}
	return out, rows.Err()
}

// readTypes records which columns of target are DateTime (whole seconds).
func (s *ClickHouseSink) readTypes(ctx context.Context, target string) error {
	rows, err := s.Conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = ?", s.Database, target)
	if err != nil {
		return fmt.Errorf("reading the columns of %s: %w", target, err)
	}
	defer rows.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seconds == nil {
		s.seconds = map[string]bool{}
	}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return fmt.Errorf("reading the columns of %s: %w", target, err)
		}
		s.seconds[name] = strings.Contains(typ, "DateTime(") || strings.HasSuffix(typ, "DateTime") ||
			strings.Contains(typ, "DateTime)")
	}
	return rows.Err()
}
