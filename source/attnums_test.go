package source

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

// TestRenameOfTheLastColumnAfterADropIsARename: against Postgres, a table's column b is dropped
// and its last column c renamed to d while no stream runs. The catalog shows d after b's dropped
// slot, as a column dropped and another added would. With the attnums recorded when the schema
// was (Fetcher.Attnums, given back as StreamOptions.Attnums) the first RELATION reports the
// rename (which the reader stops on); without them it reads as a drop and an add.
func TestRenameOfTheLastColumnAfterADropIsARename(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		record   bool
		renamed  []ColumnRename
		dropped  []string
		added    []string
		wantNums map[string]int16
	}{
		{"attnums recorded", true,
			[]ColumnRename{{Old: "c", New: "d"}}, []string{"b"}, nil, map[string]int16{"id": 1, "d": 3}},
		{"no attnums recorded", false, nil, []string{"b", "c"}, []string{"d"}, map[string]int16{"id": 1, "d": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := newTestDB(t, "CREATE TABLE r (id int PRIMARY KEY, b text, c text)")
			cfg := db.config(t, "r")
			info := setup(t, cfg)
			ctx := context.Background()
			f, err := OpenFetcher(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close(ctx)
			recorded, err := f.Attnums(ctx, info.Schemas[0])
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int16{"id": 1, "b": 2, "c": 3}; !maps.Equal(recorded, want) {
				t.Fatalf("Attnums = %v, want %v", recorded, want)
			}
			for _, sql := range []string{"ALTER TABLE r DROP COLUMN b", "ALTER TABLE r RENAME COLUMN c TO d", "INSERT INTO r VALUES (1, 'x')"} {
				db.exec(t, sql)
			}
			until := db.walLSN(t)
			var attnums map[batch.TableName]map[string]int16
			if tc.record {
				attnums = map[batch.TableName]map[string]int16{info.Schemas[0].Table: recorded}
			}
			var se *SchemaEvent
			streamFunc(t, cfg, StreamOptions{Schemas: info.Schemas, Attnums: attnums, Safe: nothingHeld}, until, func(ev Event) error {
				if e, ok := ev.(*SchemaEvent); ok && se == nil {
					se = e
				}
				return nil
			})
			if se == nil {
				t.Fatal("no schema event")
			}
			if !slices.Equal(se.RenamedColumns, tc.renamed) || !slices.Equal(se.Dropped, tc.dropped) || !slices.Equal(se.Added, tc.added) {
				t.Errorf("renamed %v dropped %v added %v, want %v %v %v", se.RenamedColumns, se.Dropped, se.Added, tc.renamed, tc.dropped, tc.added)
			}
			if !maps.Equal(se.Attnums, tc.wantNums) {
				t.Errorf("the event's attnums %v, want %v", se.Attnums, tc.wantNums)
			}
		})
	}
}
