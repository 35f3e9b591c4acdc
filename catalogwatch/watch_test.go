package catalogwatch

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

var (
	root  = batch.TableName{Schema: "public", Name: "ev"}
	plain = batch.TableName{Schema: "public", Name: "items"}
)

func part(name string, oid, node uint32) source.Partition {
	return source.Partition{Table: batch.TableName{Schema: "public", Name: name}, OID: oid, RelFileNode: node}
}

// attached is p with the xmin of its pg_inherits row.
func attached(p source.Partition, xmin uint32) source.Partition {
	p.Attached = xmin
	return p
}

func TestCompare(t *testing.T) {
	t.Parallel()
	a, b, c := part("ev_a", 1, 11), part("ev_b", 2, 12), part("ev_c", 3, 13)
	tests := []struct {
		name          string
		recorded, cur []source.Partition
		want          Diff
	}{
		{"same", []source.Partition{a, b}, []source.Partition{a, b}, Diff{}},
		{"renamed is the same", []source.Partition{a}, []source.Partition{part("ev_renamed", 1, 11)}, Diff{}},
		{"new", []source.Partition{a}, []source.Partition{a, c}, Diff{New: []source.Partition{c}}},
		{"gone", []source.Partition{a, b}, []source.Partition{a}, Diff{Gone: []source.Partition{b}}},
		{"truncated", []source.Partition{a, b}, []source.Partition{a, part("ev_b", 2, 99)}, Diff{Rewritten: []source.Partition{part("ev_b", 2, 99)}}},
		{"re-attached", []source.Partition{attached(a, 5)}, []source.Partition{attached(a, 9)}, Diff{Reattached: []source.Partition{attached(a, 9)}}},
		{"attach marker unknown", []source.Partition{a}, []source.Partition{attached(a, 9)}, Diff{}},
		{"re-attached and truncated is rewritten", []source.Partition{attached(a, 5)}, []source.Partition{attached(part("ev_a", 1, 40), 9)}, Diff{Rewritten: []source.Partition{attached(part("ev_a", 1, 40), 9)}}},
		{"all at once", []source.Partition{a, b}, []source.Partition{part("ev_a", 1, 98), c}, Diff{
			Gone: []source.Partition{b}, Rewritten: []source.Partition{part("ev_a", 1, 98)}, New: []source.Partition{c}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Compare(tt.recorded, tt.cur)
			if !slices.Equal(got.Gone, tt.want.Gone) || !slices.Equal(got.New, tt.want.New) || !slices.Equal(got.Rewritten, tt.want.Rewritten) || !slices.Equal(got.Reattached, tt.want.Reattached) {
				t.Errorf("Compare = %+v, want %+v", got, tt.want)
			}
			if got.Empty() != tt.want.Empty() {
				t.Errorf("Empty = %v, want %v", got.Empty(), tt.want.Empty())
			}
		})
	}
}

// catalog is a scripted Catalog: root (partitioned) with its partitions now, plain (not
// partitioned) with its storage, and which partitions hold rows.
type catalog struct {
	parts []source.Partition
	plain source.TableStorage
	rows  map[string]bool
}

// rootStorage is root's own storage: a partitioned table has none.
var rootStorage = source.TableStorage{OID: 100, Columns: []source.ColumnStamp{{Num: 1, Name: "id", Xmin: 5, TypeOID: 20, TypeMod: -1}}}

func (c *catalog) Storage(_ context.Context, tables []batch.TableName) (map[batch.TableName]source.Storage, error) {
	out := map[batch.TableName]source.Storage{}
	if slices.Contains(tables, root) {
		out[root] = source.Storage{TableStorage: rootStorage, Partitioned: true, Partitions: slices.Clone(c.parts)}
	}
	if slices.Contains(tables, plain) && c.plain.OID != 0 {
		out[plain] = source.Storage{TableStorage: c.plain}
	}
	return out, nil
}

func (c *catalog) PartitionHasRows(_ context.Context, p batch.TableName, _ string) (bool, error) {
	return c.rows[p.Name], nil
}

// TestWatcher follows one table through a life of partition changes: each step changes the
// catalog (and maybe records a backfill's base) and says what Check must return.
func TestWatcher(t *testing.T) {
	t.Parallel()
	a, b := part("ev_a", 1, 11), part("ev_b", 2, 12)
	type step struct {
		name     string
		parts    []source.Partition
		rows     []string
		base     string // record a backfill of this epoch first, of the catalog as it is
		want     string // "" for no reaction, else a word the reaction's reason holds
		noReact  bool   // the reaction is not marked Reacted
		wantStop bool
	}
	tests := []struct {
		name   string
		policy Policy
		steps  []step
	}{
		{"resync", "", []step{
			{name: "backfill", parts: []source.Partition{a}, base: "s1"},
			{name: "nothing changed", parts: []source.Partition{a}},
			{name: "new empty partition accepted", parts: []source.Partition{a, b}},
			{name: "still accepted", parts: []source.Partition{a, b}},
			{name: "attached with rows", parts: []source.Partition{a, b, part("ev_c", 3, 13)}, rows: []string{"ev_c"}, want: "ev_c was attached holding rows"},
			{name: "asked once until the backfill", parts: []source.Partition{a, b, part("ev_c", 3, 13)}, rows: []string{"ev_c"}},
			{name: "the backfill's base", parts: []source.Partition{a, b, part("ev_c", 3, 13)}, base: "s2"},
			{name: "detached", parts: []source.Partition{a, part("ev_c", 3, 13)}, want: "ev_b was detached or dropped"},
			{name: "backfill again", parts: []source.Partition{a, part("ev_c", 3, 13)}, base: "s3"},
			{name: "truncated", parts: []source.Partition{part("ev_a", 1, 50), part("ev_c", 3, 13)}, want: "ev_a was truncated or rewritten"},
		}},
		{"re-attached", "", []step{
			{name: "backfill", parts: []source.Partition{attached(a, 7), attached(b, 8)}, base: "s1"},
			{name: "same attach", parts: []source.Partition{attached(a, 7), attached(b, 8)}},
			{name: "detached and attached again between two checks", parts: []source.Partition{attached(a, 7), attached(b, 30)}, want: "ev_b was detached and attached again"},
			{name: "asked once", parts: []source.Partition{attached(a, 7), attached(b, 30)}},
			{name: "the backfill's base", parts: []source.Partition{attached(a, 7), attached(b, 30)}, base: "s2"},
			{name: "settled", parts: []source.Partition{attached(a, 7), attached(b, 30)}},
		}},
		{"attach marker of an older record", "", []step{
			{name: "backfill of an older release", parts: []source.Partition{a, b}, base: "s1"},
			{name: "markers recorded, no reaction", parts: []source.Partition{attached(a, 7), attached(b, 8)}},
			{name: "then compared", parts: []source.Partition{attached(a, 7), attached(b, 9)}, want: "ev_b was detached and attached again"},
		}},
		{"stop", PolicyStop, []step{
			{name: "backfill", parts: []source.Partition{a, b}, base: "s1"},
			{name: "dropped", parts: []source.Partition{a}, want: "ev_b was detached or dropped", wantStop: true},
			{name: "asked again while it stands", parts: []source.Partition{a}, want: "ev_b", wantStop: true},
			{name: "the resync's base", parts: []source.Partition{a}, base: "s2"},
			{name: "settled", parts: []source.Partition{a}},
		}},
		{"never recorded", "", []step{
			{name: "first sight is recorded", parts: []source.Partition{a}},
			{name: "then compared", parts: nil, want: "ev_a was detached"},
		}},
		{"reaction not marked is returned again", "", []step{
			{name: "backfill", parts: []source.Partition{a, b}, base: "s1"},
			{name: "dropped", parts: []source.Partition{a}, want: "ev_b", noReact: true},
			{name: "again", parts: []source.Partition{a}, want: "ev_b"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store, err := staging.OpenDir(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			w := &Watcher{Pipeline: "p", Tables: []Table{{Name: root, Policy: tt.policy}}, Store: store}
			cat := &catalog{}
			for _, s := range tt.steps {
				cat.parts, cat.rows = s.parts, map[string]bool{}
				for _, r := range s.rows {
					cat.rows[r] = true
				}
				if s.base != "" {
					if err := RecordSnapshot(ctx, store, "p", root, s.base, source.Storage{TableStorage: rootStorage, Partitioned: true, Partitions: s.parts}, time.Now()); err != nil {
						t.Fatal(err)
					}
				}
				got, err := w.Check(ctx, cat, nil, "in the test")
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				if s.want == "" {
					if len(got) != 0 {
						t.Fatalf("%s: reactions %+v, want none", s.name, got)
					}
					continue
				}
				if len(got) != 1 || !strings.Contains(got[0].Reason, s.want) {
					t.Fatalf("%s: reactions %+v, want one saying %q", s.name, got, s.want)
				}
				if stop := got[0].Policy == PolicyStop; stop != s.wantStop {
					t.Fatalf("%s: policy %s, want stop %v", s.name, got[0].Policy, s.wantStop)
				}
				if s.wantStop && !strings.Contains(got[0].StopMessage(), "sluice resync --table public.ev") {
					t.Errorf("%s: the stop message gives no remedy: %s", s.name, got[0].StopMessage())
				}
				if !s.noReact {
					if err := w.Reacted(ctx, got[0]); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// TestWatcherTruncateOfTheRoot: a TRUNCATE of the root resyncs the table by itself (the
// stream carries it); Resyncing keeps the watch from asking again for the partitions'
// new storage.
func TestWatcherTruncateOfTheRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := staging.OpenDir(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &Watcher{Pipeline: "p", Tables: []Table{{Name: root}}, Store: store}
	if err := RecordSnapshot(ctx, store, "p", root, "s1", source.Storage{TableStorage: rootStorage, Partitioned: true, Partitions: []source.Partition{part("ev_a", 1, 11)}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := w.Resyncing(ctx, root, "TRUNCATE at 0/1:1"); err != nil {
		t.Fatal(err)
	}
	got, err := w.Check(ctx, &catalog{parts: []source.Partition{part("ev_a", 1, 77)}}, nil, "in the test")
	if err != nil || len(got) != 0 {
		t.Fatalf("Check after Resyncing = %+v, %v; want no reaction", got, err)
	}
}
