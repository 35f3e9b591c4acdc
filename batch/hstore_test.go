package batch_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

func sp(s string) *string { return &s }

func TestParseHstore(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want []batch.HstorePair
		bad  bool
	}{
		{in: ``, want: nil},
		{in: `"a"=>"1"`, want: []batch.HstorePair{{"a", sp("1")}}},
		{in: `"a"=>"1", "b"=>NULL`, want: []batch.HstorePair{{"a", sp("1")}, {"b", nil}}},
		{in: `"q\"t"=>"x,y", ""=>"", "NULL"=>"NULL"`, want: []batch.HstorePair{{`q"t`, sp("x,y")}, {"", sp("")}, {"NULL", sp("NULL")}}},
		{in: `"b\\s"=>"=>, \"", "é"=>" "`, want: []batch.HstorePair{{`b\s`, sp(`=>, "`)}, {"é", sp(" ")}}},
		{in: `a=>1`, bad: true},
		{in: `"a"=>"1","b"=>"2"`, bad: true},
		{in: `"a"=>"1`, bad: true},
		{in: `"a"="1"`, bad: true},
		{in: `"a"=>"1\`, bad: true},
		{in: `"a"=>null`, bad: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			t.Parallel()
			got, err := batch.ParseHstore(c.in)
			if c.bad {
				if err == nil {
					t.Fatalf("ParseHstore(%q) = %v, want an error", c.in, got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseHstore(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
}

// TestParseHstoreAgainstPostgres builds random hstores of tricky keys and values in Postgres and
// checks that parsing the text Postgres prints (h::text) gives exactly the pairs each(h) returns,
// in order.
func TestParseHstoreAgainstPostgres(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, testenv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE EXTENSION hstore"); err != nil {
		t.Fatal(err)
	}
	pieces := []string{`"`, `\`, `\"`, `,`, `, `, `=>`, ` `, `NULL`, `null`, `a`, `Zé`, `'`, `{`, `}`, "\t", "\n", `=`, `>`, `""`, `\\`}
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		var b strings.Builder
		for range rng.IntN(5) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	for round := range 300 {
		n := rng.IntN(6)
		keys, vals := make([]string, n), make([]*string, n)
		for i := range n {
			keys[i] = word()
			if rng.IntN(4) != 0 {
				vals[i] = sp(word())
			}
		}
		var text string
		var ks []string
		var vs []*string
		err := conn.QueryRow(ctx, `SELECT h::text, coalesce((SELECT array_agg(key) FROM each(h)), '{}'),
			coalesce((SELECT array_agg(value) FROM each(h)), '{}') FROM (SELECT hstore($1::text[], $2::text[]) AS h) s`,
			keys, vals).Scan(&text, &ks, &vs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := batch.ParseHstore(text)
		if err != nil {
			t.Fatalf("round %d: ParseHstore(%q): %v", round, text, err)
		}
		var want []batch.HstorePair
		for i := range ks {
			want = append(want, batch.HstorePair{Key: ks[i], Value: vs[i]})
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: ParseHstore(%q) = %v, each(h) gives %v", round, text, got, want)
		}
	}
}

func FuzzParseHstore(f *testing.F) {
	for _, s := range []string{``, `"a"=>"1", "b"=>NULL`, `"q\"t"=>"x,y"`, `"a"=>"1\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = batch.ParseHstore(s) // must not panic
	})
}

func TestIsHstore(t *testing.T) {
	t.Parallel()
	field := func(dt arrow.DataType, name string) arrow.Field {
		return arrow.Field{Type: dt, Metadata: arrow.NewMetadata([]string{batch.MetaPGType}, []string{name})}
	}
	for _, c := range []struct {
		f    arrow.Field
		want bool
	}{
		{field(arrow.BinaryTypes.String, "hstore"), true},
		{field(arrow.BinaryTypes.String, "ext.hstore"), true},
		{field(arrow.BinaryTypes.String, "myhstore"), false},
		{field(arrow.BinaryTypes.String, "citext"), false},
		{field(arrow.ListOf(arrow.BinaryTypes.String), "hstore[]"), false},
	} {
		if got := batch.IsHstore(c.f); got != c.want {
			t.Errorf("IsHstore(%v) = %v, want %v", c.f.Metadata, got, c.want)
		}
	}
}
