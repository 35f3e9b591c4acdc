package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
)

// everyTypeDDL is a table with a column of each type that has no native Arrow mapping (extension
// types from Debian's postgresql contrib and PostGIS), domains over them and over arrays, arrays
// of them and a multi-dimensional array; ck is keyed by a citext column.
var everyTypeDDL = []string{
	"CREATE EXTENSION IF NOT EXISTS citext",
	"CREATE EXTENSION IF NOT EXISTS hstore",
	"CREATE EXTENSION IF NOT EXISTS ltree",
	"CREATE EXTENSION IF NOT EXISTS postgis",
	"CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
	"CREATE TYPE pair AS (n int, s text)",
	"CREATE DOMAIN email AS citext CHECK (VALUE LIKE '%@%')",
	"CREATE DOMAIN intlist AS int[]",
	`CREATE TABLE every (
	  id int PRIMARY KEY,
	  ci citext, em email, hs hstore, lt ltree, geom geometry, geog geography,
	  mo money, mac macaddr, mac8 macaddr8, bt bit(4), vb varbit, ttz timetz, x xml,
	  tsv tsvector, tsq tsquery, r int4range, tr tstzrange, cp pair, md int[][], o oid,
	  ip inet, en mood, il intlist, cia citext[], ttza timetz[], pt point, iv int2vector)`,
	"CREATE TABLE ck (k citext PRIMARY KEY, v int)",
}

// everyTypeRows are rows of every: all NULL, ordinary values, and values that quote, escape and
// carry offsets. $1 is a large text stored out of line.
var everyTypeRows = []string{
	`INSERT INTO every (id) VALUES (1)`,
	`INSERT INTO every VALUES (2, 'MiXeD', 'A@B.example', 'a=>1, "b c"=>NULL', 'top.science', 'SRID=4326;POINT(1 2)',
	  'POINT(-71.06 42.36)', '-1234.56', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', B'1010', B'1', '12:34:56.789+05:30',
	  '<a x="1">t&amp;</a>', 'a:1 b:2', 'a & !b', '[1,5)', '["2020-01-01 00:00:00+00",)', ROW(1, 'a "b", c'), '{{1,2},{3,4}}',
	  4294967295, '::1', 'happy', '{1,NULL,3}', '{Ab,"c d",NULL}', '{12:00:00-03:30}', '(1.5,-2)', '1 2')`,
	`INSERT INTO every VALUES (3, $1::text, 'x@y', hstore('big', $1::text), 'a', 'LINESTRING(0 0, 1 1)', 'POINT(0 0)', 0, '00:00:00:00:00:00',
	  '00:00:00:00:00:00:00:00', B'0000', B'', '00:00:00+00', $1::text::xml, to_tsvector('simple', $1::text), 'x', 'empty', 'empty',
	  ROW(NULL, NULL), '[0:1][0:0]={{7},{8}}', 0, '10.0.0.0/8', 'sad', '{}', '{}', '{}', '(0,0)', '')`,
}

// TestEveryTypeHasNoPreflightProblem checks that sluice check (source.Check) finds no problem with
// a table holding a column of each type above.
func TestEveryTypeHasNoPreflightProblem(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, everyTypeDDL...)
	cfg := db.config(t, "every", "ck")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	problems, err := Check(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("problem: %s", p)
	}
}

// TestEveryTypeRoundTrip writes the rows above, then reads them through the snapshot and through
// the stream: both give the text Postgres prints for each value, build into Arrow
// records with the documented types, and an update that leaves the large values unchanged gets
// them filled by the fetcher, never NULL.
func TestEveryTypeRoundTrip(t *testing.T) {
	t.Parallel()
	raw := make([]byte, 10_000) // incompressible: stored out of line
	_, _ = rand.Read(raw)
	big := hex.EncodeToString(raw)
	db := newTestDB(t, everyTypeDDL...)
	cfg := db.config(t, "every", "ck")
	info := setup(t, cfg)
	schema := info.Schemas[0]
	for _, sql := range everyTypeRows {
		if strings.Contains(sql, "$1") {
			db.exec(t, sql, big)
		} else {
			db.exec(t, sql)
		}
	}
	db.exec(t, "INSERT INTO ck VALUES ('b', 1), ('A', 2), ('c', 3), ('B2', 4), ('a0', 5)")
	db.exec(t, "UPDATE every SET mo = 1 WHERE id = 3") // the large values stay unchanged
	until := db.walLSN(t)

	want := db.printedText(t, "every", schema)
	snap, err := OpenSnapshot(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(context.Background())
	fromSnapshot := readAll(t, snap, schema, 2)
	checkPrinted(t, "snapshot", schema, fromSnapshot, want)
	buildRecord(t, schema, fromSnapshot)

	evs := stream(t, cfg, info.Schemas, until)
	fromStream := changesOf(evs, "public.every")
	if len(fromStream) != len(everyTypeRows)+1 {
		t.Fatalf("got %d stream changes, want %d", len(fromStream), len(everyTypeRows)+1)
	}
	update := fromStream[len(fromStream)-1]
	if !NeedsFill(update) {
		t.Fatal("the update of row 3 carries no unchanged TOAST value: the test's large values are not stored out of line")
	}
	f, err := OpenFetcher(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	filled, err := f.Fill(context.Background(), schema, []batch.Change{update})
	if err != nil {
		t.Fatal(err)
	}
	inserts := fromStream[: len(fromStream)-1 : len(fromStream)-1]
	checkPrinted(t, "stream", schema, append(inserts, filled...), want)
	buildRecord(t, schema, inserts)

	as, err := batch.ArrowSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]string{"ci": "utf8", "em": "utf8", "geom": "utf8", "ttz": "utf8", "md": "utf8", "o": "int64",
		"il": "list<element: int32, nullable>", "cia": "list<element: utf8, nullable>", "iv": "utf8"} {
		if f, ok := as.FieldsByName(name); !ok || f[0].Type.String() != typ {
			t.Errorf("column %s maps to %v, want %s", name, f, typ)
		}
	}

	// A citext key pages in citext order: every row once.
	ckRows := readAll(t, snap, info.Schemas[1], 2)
	if len(ckRows) != 5 {
		t.Errorf("keyset pagination over a citext key read %d rows, want 5", len(ckRows))
	}
}

// printedText returns the text Postgres prints for each column of table, by id: the type's output
// function, as format's %s calls it (a cast to text differs for some types: inet adds /128).
func (db *testDB) printedText(t *testing.T, table string, schema batch.Schema) map[string][]*string {
	t.Helper()
	cols := make([]string, len(schema.Columns))
	for i, c := range schema.Columns {
		cols[i] = fmt.Sprintf("CASE WHEN num_nulls(%[1]s) = 0 THEN format('%%s', %[1]s) END", quoteIdent(c.Name))
	}
	rows, err := db.conn.Query(context.Background(), fmt.Sprintf("SELECT %s FROM %s", strings.Join(cols, ", "), quoteIdent(table)))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]*string{}
	for rows.Next() {
		vals := make([]*string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out[*vals[0]] = vals
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPrinted checks that the last change of each key holds exactly the printed text of its row.
func checkPrinted(t *testing.T, path string, schema batch.Schema, changes []batch.Change, want map[string][]*string) {
	t.Helper()
	last := map[string]batch.Change{}
	for _, c := range changes {
		last[string(c.Values[0].Text)] = c
	}
	if len(last) != len(want) {
		t.Errorf("%s: %d keys, want %d", path, len(last), len(want))
	}
	for id, w := range want {
		c, ok := last[id]
		if !ok {
			t.Errorf("%s: key %s missing", path, id)
			continue
		}
		for j, col := range schema.Columns {
			v := c.Values[j]
			switch {
			case v.Unchanged:
				t.Errorf("%s: key %s column %s (%s) is still unchanged", path, id, col.Name, col.TypeName)
			case w[j] == nil && !v.Null, w[j] != nil && (v.Null || string(v.Text) != *w[j]):
				t.Errorf("%s: key %s column %s (%s) is %q (null %v), Postgres prints %v", path, id, col.Name, col.TypeName,
					short(v.Text), v.Null, printed(w[j]))
			}
		}
	}
}

func printed(s *string) string {
	if s == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", short([]byte(*s)))
}
