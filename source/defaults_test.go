package source

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

func TestColumnsWithDefaults(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, `CREATE TABLE public.d (id int PRIMARY KEY, a text)`,
		`INSERT INTO public.d SELECT g, 'x' FROM generate_series(1, 10) g`,
		`ALTER TABLE public.d ADD COLUMN plain text`,
		`ALTER TABLE public.d ADD COLUMN konst int NOT NULL DEFAULT 7`,
		`ALTER TABLE public.d ADD COLUMN volatile double precision DEFAULT random()`,
		`ALTER TABLE public.d ADD COLUMN "Odd ""name""" text DEFAULT 'y'`,
		`ALTER TABLE public.d ADD COLUMN dropped_default int DEFAULT 1`,
		`ALTER TABLE public.d ALTER COLUMN dropped_default DROP DEFAULT`)
	ctx := context.Background()
	f, err := OpenFetcher(ctx, Config{DSN: db.dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	table := batch.TableName{Schema: "public", Name: "d"}
	for _, tc := range []struct {
		name       string
		cols, want []string
	}{
		{"none asked", nil, nil},
		{"no default", []string{"plain"}, nil},
		{"constant default", []string{"plain", "konst"}, []string{"konst"}},
		{"volatile default (table rewritten)", []string{"volatile"}, []string{"volatile"}},
		{"quoted name", []string{`Odd "name"`}, []string{`Odd "name"`}},
		// Old rows keep the value the default gave them, though the default is gone.
		{"default dropped later", []string{"dropped_default"}, []string{"dropped_default"}},
		{"every added column", []string{"plain", "konst", "volatile", `Odd "name"`, "dropped_default"},
			[]string{"konst", "volatile", `Odd "name"`, "dropped_default"}},
		{"unknown column", []string{"nope"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.ColumnsWithDefaults(ctx, table, tc.cols)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ColumnsWithDefaults(%q) = %q, want %q", tc.cols, got, tc.want)
			}
		})
	}
}
