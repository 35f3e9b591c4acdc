package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/couchbase/gocb/v2"
	"github.com/shopspring/decimal"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/workload"
)

// everyTable has a column of each type without a native Arrow mapping (docs/types.md): extension
// types from Debian's postgresql contrib (citext, hstore, ltree) and PostGIS, domains over them
// and over arrays, arrays of them, a multi-dimensional array and oid; and interval and
// interval[], which the sinks hold as ISO 8601 text (compared with Postgres' iso_8601 style).
var everyTable = batch.TableName{Schema: "public", Name: "every"}

// everyColumns are the columns of everyTable compared in every sink.
var everyColumns = []string{"ci", "em", "hs", "lt", "geom", "geog", "mo", "mac", "mac8", "bt", "vb", "ttz", "x",
	"tsv", "tsq", "r", "tr", "cp", "md", "o", "ip", "en", "il", "cia", "ttza", "iv", "iva"}

// everyBig is a 12.8 kB random hex text: incompressible enough to be stored out of line, so an
// update that does not change it sends it as an unchanged TOAST value.
const everyBig = `(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 400))`

// everyRow returns the INSERT of generated row i (ClickHouse cannot tell a NULL array from an
// empty one, so arrays are never NULL here).
func everyRow(lo, hi int) string {
	return fmt.Sprintf(`INSERT INTO every (id, ci, em, hs, lt, geom, geog, mo, mac, mac8, bt, vb, ttz, x, tsv, tsq, r, tr, cp, md, o, ip, en, il, cia, ttza, iv, iva)
SELECT i, 'Name ' || i, 'User' || i || '@Example.org', hstore(ARRAY['k', 'n'], ARRAY['v ' || i, i::text]), ('top.n' || i)::ltree,
  ST_MakePoint(i, -i), ST_MakePoint(i / 10.0, i / 20.0)::geography, i * 1.25, ('08:00:2b:01:02:' || lpad(to_hex(i %% 256), 2, '0'))::macaddr,
  '08:00:2b:01:02:03:04:05', (i %% 16)::bit(4), (i %% 5)::bit(3)::varbit, (make_time(i %% 24, i %% 60, 1.5)::text || '+05:30')::timetz,
  ('<r n="' || i || '">t</r>')::xml, to_tsvector('simple', 'word' || i || ' other'), ('q' || i)::tsquery, int4range(i, i + 10),
  tstzrange('2020-01-01'::timestamptz + i * interval '1 day', NULL), ROW(i, 's "' || i || '"')::pair, ARRAY[[i, i + 1], [i + 2, i + 3]],
  (1000 + i)::oid, ('10.0.' || (i %% 256) || '.0/24')::inet, (ARRAY['sad', 'ok', 'happy'])[i %% 3 + 1]::mood, ARRAY[i, NULL, -i],
  ARRAY['Ab' || i, NULL], ARRAY['12:00:00-03:30'::timetz],
  make_interval(months => i - 20, days => 15 - i, secs => (i %% 7 - 3) * 3599.75 + i / 1e6),
  ARRAY[make_interval(days => -i), NULL, make_interval(months => -i, secs => i * 0.5)]
FROM generate_series(%d, %d) i`, lo, hi)
}

// everySetup creates the extensions, types and table and seeds rows 1-40: row 1 all NULL but its
// arrays, row 2 values that quote and escape, rows 3 and 10-12 large values.
func everySetup() []string {
	return []string{
		"CREATE EXTENSION IF NOT EXISTS citext",
		"CREATE EXTENSION IF NOT EXISTS hstore",
		"CREATE EXTENSION IF NOT EXISTS ltree",
		"CREATE EXTENSION IF NOT EXISTS postgis",
		"CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
		"CREATE TYPE pair AS (n int, s text)",
		"CREATE DOMAIN email AS citext CHECK (VALUE LIKE '%@%')",
		"CREATE DOMAIN intlist AS int[]",
		`CREATE TABLE every (id int PRIMARY KEY,
		  ci citext, em email, hs hstore, lt ltree, geom geometry, geog geography, mo money, mac macaddr, mac8 macaddr8,
		  bt bit(4), vb varbit, ttz timetz, x xml, tsv tsvector, tsq tsquery, r int4range, tr tstzrange, cp pair, md int[][],
		  o oid, ip inet, en mood, il intlist, cia citext[], ttza timetz[], iv interval, iva interval[])`,
		`INSERT INTO every (id, il, cia, ttza, iva) VALUES (1, '{}', '{}', '{}', '{}')`,
		`INSERT INTO every VALUES (2, 'MiXeD', 'A@B.example', 'a=>1, "b c"=>NULL, "q\"t"=>"x,y"', 'top.science', 'SRID=4326;POINT(1 2)',
		  'POINT(-71.06 42.36)', '-1234.56', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', B'1010', B'', '12:34:56.789+05:30',
		  '<a x="1">t&amp;</a>', 'a:1 b:2', 'a & !b', 'empty', '["2020-01-01 00:00:00+00",)', ROW(NULL, 'a "b", c'),
		  '[0:1][0:0]={{7},{8}}', 4294967295, '10.1.2.3/16', 'happy', '{1,NULL,3}', '{Ab,"c d",NULL,""}', '{12:00:00-03:30,NULL}',
		  '-1 year 2 mons -3 days +04:05:06.000007', '{"-0.5 seconds","0","-14 mons 1 day -100:00:00",NULL}')`,
		everyRow(3, 40),
		`UPDATE every SET ci = ` + everyBig + `, hs = hstore('big', ` + everyBig + `), x = ('<big>' || ` + everyBig + ` || '</big>')::xml
		  WHERE id IN (3, 10, 11, 12)`,
	}
}

// everyChanges are the stream's changes: inserts (one with large values), updates that leave the
// large values unchanged, updates of every kind of column, values set to NULL, and deletes.
var everyChanges = []string{
	everyRow(41, 46),
	`UPDATE every SET ci = ` + everyBig + `, hs = hstore('big', ` + everyBig + `) WHERE id = 46`,
	`UPDATE every SET mo = mo + 1::money, o = (o::bigint + 1)::oid WHERE id IN (3, 10, 11, 46)`,
	`UPDATE every SET ci = upper(ci), em = lower(em), hs = hs || 'z=>1'::hstore, lt = lt || 'x', ttz = '23:59:59-12',
	  md = '{{9}}', geom = ST_Translate(geom, 1, 1), cp = ROW(0, NULL), il = il || 4, cia = cia || 'New'::citext WHERE id BETWEEN 4 AND 8`,
	`UPDATE every SET x = NULL, tsv = NULL, r = NULL, geog = NULL, iv = NULL WHERE id = 6`,
	`UPDATE every SET iv = -iv, iva = iva || '-1 mon 1 day -00:00:00.000001'::interval WHERE id IN (8, 9)`,
	`UPDATE every SET id = 400 WHERE id = 7`,
	`DELETE FROM every WHERE id IN (5, 20, 41, 11)`,
}

// TestEveryTypeIntoEverySink backfills everyTable into each sink, streams everyChanges, and waits
// until the sink equals the source key by key, every column compared with the text Postgres
// prints (arrays as JSON). sluice check reports no problem with the table.
func TestEveryTypeIntoEverySink(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			dest := sk.dest(t)
			target := dest.target(everyTable.Name)
			p := newPipelineWith(t, pipelineOptions{Sink: dest.yaml, Tables: []string{everyTable.String() + ":" + target}, SetupSQL: everySetup()})
			if out := p.sluice("check"); strings.Contains(out, "problem") {
				t.Fatalf("sluice check reports problems:\n%s", out)
			}
			p.worker("worker")
			p.sluice("start")
			p.waitStream(everyTable)
			p.exec(everyChanges...)
			universe := append(keys([2]int{1, 46}), "400")
			p.waitEqualTo(everyTable.String(), "id", everyColumns, dest.read(p, target, everyColumns, universe))
		})
	}
}

// clickhouseColumns reads table's visible rows (SELECT ... FINAL with the tombstone filter) over
// columns, every one in the canonical text of ScanPostgres (arrays as JSON, NULL as "NULL").
func clickhouseColumns(conn driver.Conn, table string, columns []string) sinkReader {
	return func(ctx context.Context) (localrun.Table, error) {
		out := localrun.Table{Columns: columns, Rows: map[string][]string{}}
		quoted := make([]string, len(columns))
		for i, c := range columns {
			quoted[i] = "`" + c + "`"
		}
		rows, err := conn.Query(ctx, fmt.Sprintf("SELECT toString(id), %s FROM %s FINAL WHERE _is_deleted = 0", strings.Join(quoted, ", "), table))
		if err != nil {
			return out, err
		}
		defer rows.Close()
		types := rows.ColumnTypes()
		out.Stored = clickhouseStored(types[1:])
		for rows.Next() {
			dst := make([]any, len(types))
			for i, ct := range types {
				dst[i] = reflect.New(ct.ScanType()).Interface()
			}
			if err := rows.Scan(dst...); err != nil {
				return out, err
			}
			id := *dst[0].(*string)
			if _, dup := out.Rows[id]; dup {
				return out, fmt.Errorf("id %s visible twice", id)
			}
			row := make([]string, len(columns))
			for i := range columns {
				row[i] = canonicalText(reflect.ValueOf(dst[i+1]).Elem(), types[i+1].DatabaseTypeName())
			}
			out.Rows[id] = row
		}
		return out, rows.Err()
	}
}

// clickhouseStored is what ClickHouse stores for a source value (its ScanPostgres text) of each
// of columns, by the column's ClickHouse type, where docs/types.md documents a loss: arrays cannot
// be Nullable, so a NULL array is an empty one; a DateTime (the compatible layout's timestamp)
// keeps whole seconds. It is the one rule the tests compare ClickHouse by; every other value is
// stored exactly.
func clickhouseStored(columns []driver.ColumnType) func(int, string) string {
	return func(i int, text string) string {
		typ := strings.TrimSuffix(strings.TrimPrefix(columns[i].DatabaseTypeName(), "Nullable("), ")")
		switch {
		case strings.HasPrefix(typ, "Array(") && text == "NULL":
			return "[]"
		case strings.HasPrefix(typ, "DateTime(") || typ == "DateTime":
			// 2026-01-01T00:00:05.123456Z: the fraction is dropped.
			if len(text) == len("2006-01-02T15:04:05.000000Z") && text[19] == '.' {
				return text[:20] + "000000Z"
			}
		}
		return text
	}
}

// canonicalText prints a value scanned from ClickHouse column type typ as ScanPostgres prints
// the source's: a decimal with its column's scale (numeric(10,2) prints 12.50), a DateTime or
// DateTime64 in UTC as RFC 3339 with microseconds.
func canonicalText(v reflect.Value, typ string) string {
	switch x := v.Interface().(type) {
	case decimal.Decimal:
		if m := decimalScaleRE.FindStringSubmatch(typ); m != nil {
			scale, _ := strconv.Atoi(m[1])
			return x.StringFixed(int32(scale))
		}
	case time.Time:
		return x.UTC().Format("2006-01-02T15:04:05.000000Z")
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "NULL"
		}
		return canonicalText(v.Elem(), typ)
	case reflect.Slice:
		elems := make([]string, v.Len())
		for i := range elems {
			e := v.Index(i)
			for (e.Kind() == reflect.Pointer || e.Kind() == reflect.Interface) && !e.IsNil() {
				e = e.Elem()
			}
			switch {
			case (e.Kind() == reflect.Pointer || e.Kind() == reflect.Interface) && e.IsNil():
				elems[i] = "null"
			case e.Kind() == reflect.String:
				b, _ := json.Marshal(e.String())
				elems[i] = string(b)
			default:
				elems[i] = canonicalText(e, typ)
			}
		}
		return "[" + strings.Join(elems, ",") + "]"
	case reflect.String:
		return v.String()
	}
	return fmt.Sprint(v.Interface())
}

// decimalScaleRE finds the scale of a ClickHouse Decimal(P, S) type.
var decimalScaleRE = regexp.MustCompile(`Decimal\(\d+, (\d+)\)`)

// couchbaseColumns reads the documents of every key in universe from col over columns, every
// member in the canonical text of ScanPostgres, in bulk requests (workload.GetDocuments: a
// key-by-key read of tens of thousands of keys is too slow to poll).
func couchbaseColumns(col *gocb.Collection, universe, columns []string) sinkReader {
	return func(ctx context.Context) (localrun.Table, error) {
		out := localrun.Table{Columns: columns, Rows: map[string][]string{}}
		err := workload.GetDocuments(ctx, col, universe, func(id string, body json.RawMessage) error {
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(body, &doc); err != nil {
				return fmt.Errorf("document %s: %w", id, err)
			}
			row := make([]string, len(columns))
			for i, c := range columns {
				var err error
				if bytes.HasPrefix(doc[c], []byte("{")) { // hstore, the only object member here
					row[i], err = workload.HstoreText(doc[c])
				} else {
					row[i], err = jsonText(doc[c])
				}
				if err != nil {
					return fmt.Errorf("document %s member %s: %w", id, c, err)
				}
			}
			out.Rows[id] = row
			return nil
		})
		return out, err
	}
}

// jsonText prints a document member as ScanPostgres prints the source's value: strings as they
// are, numbers as written, arrays as JSON with strings quoted as encoding/json quotes them.
func jsonText(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if len(raw) == 0 {
		return "NULL", nil
	}
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	return jsonValueText(v, true), nil
}

// timestampText prints a timestamptz member (RFC 3339 in UTC with at most six fractional
// digits, as the sink writes it) with exactly six, as ScanPostgres prints it; any other string
// is returned as it is.
func timestampText(s string) string {
	if !strings.HasSuffix(s, "Z") || !strings.Contains(s, "T") {
		return s
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Nanosecond()%1000 != 0 {
		return s
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

func jsonValueText(v any, top bool) string {
	switch x := v.(type) {
	case nil:
		if top {
			return "NULL"
		}
		return "null"
	case string:
		if top {
			return timestampText(x)
		}
		b, _ := json.Marshal(x)
		return string(b)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case []any:
		elems := make([]string, len(x))
		for i, e := range x {
			elems[i] = jsonValueText(e, false)
		}
		return "[" + strings.Join(elems, ",") + "]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
