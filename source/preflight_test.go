package source

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

func TestPreflightReportsEveryProblem(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		"CREATE TABLE ok (id int PRIMARY KEY, v text)",
		"CREATE TABLE nopk (id int, v text)",
		"CREATE TABLE keyed_full (id int NOT NULL, v text)",
		"CREATE UNIQUE INDEX keyed_full_id ON keyed_full (id)",
		"ALTER TABLE keyed_full REPLICA IDENTITY FULL",
		"CREATE TABLE keyed_default (id int NOT NULL, v text)",
		"CREATE TABLE nullable_key (id int, v text)",
		"ALTER TABLE nullable_key REPLICA IDENTITY FULL",
		"CREATE TABLE odd (id int PRIMARY KEY, p point, ts tsvector)",
		"CREATE TABLE filtered (id int PRIMARY KEY, v text)",
	)
	cfg := db.config(t, "ok", "nopk", "keyed_full", "keyed_default", "nullable_key", "odd", "missing", "filtered")
	cfg.Tables[2].Key = []string{"id"}
	cfg.Tables[3].Key = []string{"id"}
	cfg.Tables[4].Key = []string{"id"}
	db.exec(t, "CREATE PUBLICATION "+cfg.Publication+" FOR TABLE filtered WHERE (id > 10)")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Setup(ctx, cfg, slog.New(slog.DiscardHandler))
	var pe *PreflightError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPreflight) || !failure.Is(err) {
		t.Fatalf("want a permanent *PreflightError, got %v", err)
	}
	want := []struct{ subject, message string }{
		{"table public.nopk", "no primary key"},
		{"table public.keyed_default", "not proven unique"},
		{"table public.keyed_default", "not carried by the table's replica identity"},
		{"column public.nullable_key.id", "allows NULL"},
		{"table public.missing", "does not exist"},
		{"publication " + cfg.Publication, "row filter"},
	}
	for _, w := range want {
		found := false
		for _, p := range pe.Problems {
			if p.Subject == w.subject && strings.Contains(p.Message, w.message) && p.Fix != "" {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem for %s saying %q in:\n%v", w.subject, w.message, err)
		}
	}
	if len(pe.Problems) != len(want) {
		t.Errorf("want %d problems, got %d:\n%v", len(want), len(pe.Problems), err)
	}
	for _, p := range pe.Problems {
		if strings.Contains(p.Subject, "public.ok") || strings.Contains(p.Subject, "keyed_full") || strings.Contains(p.Subject, "public.odd") {
			t.Errorf("unexpected problem for a valid table: %s", p)
		}
	}
	if s, _ := readSlot(ctx, db.conn, cfg.Slot); s.Exists {
		t.Error("a failed preflight must not create the slot")
	}
}

func TestSetupIsIdempotentAndAddsTables(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		"CREATE TABLE a (id int PRIMARY KEY, v text NOT NULL)",
		"CREATE TABLE b (x bigint NOT NULL, y text NOT NULL, z int, PRIMARY KEY (y, x))")
	cfg := db.config(t, "a")
	first := setup(t, cfg)
	if !first.SlotCreated || first.ID.SystemID == "" || first.ID.Timeline < 1 || first.ID.Slot != cfg.Slot || first.ConfirmedLSN == 0 {
		t.Fatalf("first setup: %+v", first)
	}
	cfg.Tables = append(cfg.Tables, TableConfig{Table: batch.TableName{Schema: "public", Name: "b"}})
	second := setup(t, cfg)
	if second.SlotCreated || second.ID != first.ID || len(second.Schemas) != 2 {
		t.Fatalf("second setup: %+v", second)
	}
	b := second.Schemas[1]
	var keys []string
	for _, c := range b.Columns {
		if c.Key {
			keys = append(keys, c.Name)
		}
	}
	if strings.Join(keys, ",") != "x,y" || !b.Columns[0].NotNull || b.Columns[2].NotNull || b.Columns[0].TypeName != "bigint" {
		t.Errorf("schema of b: %+v", b)
	}
	var n int
	if err := db.conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_publication_tables WHERE pubname = $1", cfg.Publication).Scan(&n); err != nil || n != 2 {
		t.Errorf("publication has %d tables (%v), want 2", n, err)
	}
	if err := Teardown(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if s, _ := readSlot(context.Background(), db.conn, cfg.Slot); s.Exists {
		t.Error("teardown left the slot")
	}
}

func TestSecondStreamGetsSlotInUse(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "CREATE TABLE a (id int PRIMARY KEY)")
	cfg := db.config(t, "a")
	info := setup(t, cfg)
	started := make(chan struct{}, 1)
	_, stop := runStream(t, cfg, StreamOptions{Schemas: info.Schemas, Safe: nothingHeld}, func(_ context.Context, ev Event) error {
		select {
		case started <- struct{}{}:
		default:
		}
		return nil
	})
	defer stop()
	<-started
	r, err := NewStream(cfg, StreamOptions{Schemas: info.Schemas, Safe: nothingHeld})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Run(ctx, func(context.Context, Event) error { return nil }); !errors.Is(err, ErrSlotInUse) {
		t.Fatalf("want ErrSlotInUse, got %v", err)
	}
}

func TestPreflightMissingPrivileges(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "CREATE TABLE secret (id int PRIMARY KEY)")
	role := testenv.RandomName("sluice_role_")
	db.exec(t, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() {
		_, _ = db.conn.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = db.conn.Exec(context.Background(), "DROP ROLE "+role)
	})
	u, err := url.Parse(db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	cfg := db.config(t, "secret")
	cfg.DSN = u.String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	problems, err := Check(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Subject+": "+p.Message)
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"neither REPLICATION nor SUPERUSER", "cannot SELECT", "needs ownership of table public.secret"} {
		if !strings.Contains(all, want) {
			t.Errorf("no problem saying %q in:\n%s", want, all)
		}
	}
}

// TestPreflightProvesAConfiguredKeyUnique: a configured key (tables[].key) passes only when it
// holds the primary key's columns or a unique index's (valid, no expression, no WHERE) whose
// columns are NOT NULL or that is NULLS NOT DISTINCT; otherwise distinct rows sharing the key
// would collapse into one target row, and preflight names the key, the candidates and the fix.
func TestPreflightProvesAConfiguredKeyUnique(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		// Every table is REPLICA IDENTITY FULL, so only uniqueness is judged.
		"CREATE TABLE pk (id int PRIMARY KEY, b int NOT NULL, v text)",
		"CREATE TABLE no_index (a int NOT NULL, b int NOT NULL, v text)",
		"CREATE TABLE uq (a int NOT NULL, b int NOT NULL, c int, d int NOT NULL, v text)",
		"CREATE UNIQUE INDEX uq_ab ON uq (a, b)",
		"CREATE UNIQUE INDEX uq_c ON uq (c)", // c allows NULL: it proves nothing
		"CREATE TABLE nnd (a int NOT NULL, c int, v text)",
		"CREATE UNIQUE INDEX nnd_ac ON nnd (a, c) NULLS NOT DISTINCT",
		"CREATE TABLE partial (a int NOT NULL, v text)",
		"CREATE UNIQUE INDEX partial_a ON partial (a) WHERE a > 0",
		"CREATE TABLE expr (a text NOT NULL, v text)",
		"CREATE UNIQUE INDEX expr_a ON expr (lower(a))",
		"CREATE TABLE incl (a int NOT NULL, b int NOT NULL)",
		"CREATE UNIQUE INDEX incl_a ON incl (a) INCLUDE (b)",
		"CREATE TABLE invalid (a int NOT NULL, v text)",
		"INSERT INTO invalid VALUES (1, 'x'), (1, 'y')",
		`CREATE TABLE "Mixed" ("Region" int NOT NULL, id int NOT NULL)`,
		`CREATE UNIQUE INDEX mixed_uq ON "Mixed" ("Region", id)`,
	)
	for _, tbl := range []string{"pk", "no_index", "uq", "nnd", "partial", "expr", "incl", "invalid", `"Mixed"`} {
		db.exec(t, "ALTER TABLE "+tbl+" REPLICA IDENTITY FULL")
	}
	// A CREATE UNIQUE INDEX CONCURRENTLY that fails leaves an invalid index behind.
	if _, err := db.conn.Exec(context.Background(), "CREATE UNIQUE INDEX CONCURRENTLY invalid_a ON invalid (a)"); err == nil {
		t.Fatal("CREATE UNIQUE INDEX CONCURRENTLY over duplicates succeeded")
	}
	tests := []struct {
		name  string
		table string
		key   []string
		want  []string // parts of the one problem; none: the key passes
	}{
		{name: "the primary key", table: "pk", key: []string{"id"}},
		{name: "a superset of the primary key", table: "pk", key: []string{"id", "b"}},
		{name: "a column beside the primary key", table: "pk", key: []string{"b"},
			want: []string{"the configured key (b) is not proven unique", "collapse into one target row",
				`CREATE UNIQUE INDEX ON "public"."pk" ("b")`, "tables[].key", "(id) of index pk_pkey"}},
		{name: "no unique index at all", table: "no_index", key: []string{"a", "b"},
			want: []string{"the configured key (a, b) is not proven unique", `CREATE UNIQUE INDEX ON "public"."no_index" ("a", "b")`}},
		{name: "a unique index on NOT NULL columns", table: "uq", key: []string{"a", "b"}},
		{name: "a unique index's columns in another order", table: "uq", key: []string{"b", "a"}},
		{name: "a superset of a unique index", table: "uq", key: []string{"d", "b", "a"}},
		{name: "part of a unique index", table: "uq", key: []string{"a"},
			want: []string{"the configured key (a) is not proven unique", "(a, b) of index uq_ab"}},
		{name: "NULLS NOT DISTINCT over a nullable column", table: "nnd", key: []string{"a", "c"},
			want: []string{"column public.nnd.c: is a configured key column but allows NULL"}}, // the key itself must be NOT NULL
		{name: "a NULLS NOT DISTINCT index within the key", table: "nnd", key: []string{"a"},
			want: []string{"the configured key (a) is not proven unique", "(a, c) of index nnd_ac"}},
		{name: "a partial unique index", table: "partial", key: []string{"a"}, want: []string{"the configured key (a) is not proven unique"}},
		{name: "an expression index", table: "expr", key: []string{"a"}, want: []string{"the configured key (a) is not proven unique"}},
		{name: "an index with INCLUDE columns: its key columns", table: "incl", key: []string{"a"}},
		{name: "INCLUDE columns prove nothing", table: "incl", key: []string{"b"}, want: []string{"the configured key (b) is not proven unique"}},
		{name: "an invalid index", table: "invalid", key: []string{"a"}, want: []string{"the configured key (a) is not proven unique"}},
		{name: "names as Postgres stores them", table: `"Mixed"`, key: []string{"id", "Region"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := db.config(t, tt.table)
			cfg.Tables[0].Key = tt.key
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			problems, err := Check(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range problems {
				if !strings.HasPrefix(p.Subject, "publication") && !strings.HasPrefix(p.Subject, "role") {
					got = append(got, p.String())
				}
			}
			if len(tt.want) == 0 {
				if len(got) > 0 {
					t.Errorf("key %q: want no problem, got:\n%s", tt.key, strings.Join(got, "\n"))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("key %q: want one problem, got:\n%s", tt.key, strings.Join(got, "\n"))
			}
			for _, w := range tt.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("the problem does not say %q:\n%s", w, got[0])
				}
			}
		})
	}
}
