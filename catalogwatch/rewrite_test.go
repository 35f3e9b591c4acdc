package catalogwatch

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

const (
	oidInt4    = 23
	oidInt8    = 20
	oidText    = 25
	oidVarchar = 1043
)

// col is a column stamp of attnum num, pg_attribute xmin and type.
func col(num int, name string, xmin, typ uint32, mod int32) source.ColumnStamp {
	return source.ColumnStamp{Num: num, Name: name, Xmin: xmin, TypeOID: typ, TypeMod: mod}
}

// items is a plain table's storage: id bigint, qty int, name varchar(10).
func items(oid, node uint32, cols ...source.ColumnStamp) source.TableStorage {
	base := []source.ColumnStamp{col(1, "id", 5, oidInt8, -1), col(2, "qty", 5, oidInt4, -1), col(3, "name", 5, oidVarchar, 14)}
	for _, c := range cols {
		i := slices.IndexFunc(base, func(b source.ColumnStamp) bool { return b.Num == c.Num })
		if i < 0 {
			base = append(base, c)
		} else {
			base[i] = c
		}
	}
	return source.TableStorage{OID: oid, RelFileNode: node, Columns: base}
}

func TestCompareStorage(t *testing.T) {
	t.Parallel()
	rec := items(1, 10)
	tests := []struct {
		name    string
		cur     source.TableStorage
		rewrite bool
		columns []string
	}{
		{"nothing changed", items(1, 10), false, nil},
		{"maintenance rewrite (VACUUM FULL, CLUSTER)", items(1, 11), false, nil},
		{"a column row changed without a rewrite (SET NOT NULL, varchar widened in place)", items(1, 10, col(3, "name", 9, oidVarchar, 24)), false, nil},
		{"same type with USING", items(1, 11, col(2, "qty", 9, oidInt4, -1)), true, []string{"qty"}},
		{"a widening that rewrites (int to bigint)", items(1, 11, col(2, "qty", 9, oidInt8, -1)), true, []string{"qty"}},
		{"a renamed column is the same column", items(1, 11, col(2, "amount", 9, oidInt4, -1)), true, []string{"amount"}},
		{"two columns", items(1, 11, col(2, "qty", 9, oidInt8, -1), col(1, "id", 9, oidInt8, -1)), true, []string{"id", "qty"}},
		{"not a widening: left to the schema-change stop", items(1, 11, col(3, "name", 9, oidInt4, -1)), false, nil},
		{"a column added with the rewrite (volatile default)", items(1, 11, col(4, "added", 9, oidText, -1)), false, nil},
		{"a column dropped with the rewrite", source.TableStorage{OID: 1, RelFileNode: 11, Columns: rec.Columns[:2]}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := CompareStorage(rec, tt.cur)
			if got.Values() != tt.rewrite || !slices.Equal(got.Columns, tt.columns) {
				t.Errorf("CompareStorage = %+v (values %v), want values %v, columns %v", got, got.Values(), tt.rewrite, tt.columns)
			}
			if r := got.reason(); (r != "") != tt.rewrite || (tt.rewrite && !strings.Contains(r, tt.columns[0])) {
				t.Errorf("reason %q, want one naming %v", r, tt.columns)
			}
		})
	}
	if rw := CompareStorage(source.TableStorage{OID: 1, RelFileNode: 10}, items(1, 11)); !rw.Values() || !rw.Unknown {
		t.Errorf("a rewrite against a record without columns = %+v, want a reaction (cannot tell)", rw)
	}
}

// TestWatcherRewrites follows a plain table through rewrites: each step sets its storage (and
// maybe records a backfill's base of it) and says what Check must return.
func TestWatcherRewrites(t *testing.T) {
	t.Parallel()
	type step struct {
		name    string
		cur     source.TableStorage
		base    string
		want    string // "" for no reaction, else a word the reaction's reason holds
		resync  bool   // call Resyncing (a TRUNCATE the stream carried) before the check
		stopErr string // the stop's error type when the policy is stop
	}
	tests := []struct {
		name   string
		policy Policy
		steps  []step
	}{
		{"resync", "", []step{
			{name: "backfill", cur: items(1, 10), base: "s1"},
			{name: "VACUUM FULL accepted", cur: items(1, 11)},
			{name: "CLUSTER accepted", cur: items(1, 12)},
			{name: "ALTER TYPE int USING", cur: items(1, 13, col(2, "qty", 9, oidInt4, -1)), want: "column qty"},
			{name: "asked once until the backfill", cur: items(1, 13, col(2, "qty", 9, oidInt4, -1))},
			{name: "the backfill's base", cur: items(1, 13, col(2, "qty", 9, oidInt4, -1)), base: "s2"},
			{name: "varchar widened in place", cur: items(1, 13, col(2, "qty", 9, oidInt4, -1), col(3, "name", 10, oidVarchar, 24))},
			{name: "then VACUUM FULL is still maintenance", cur: items(1, 14, col(2, "qty", 9, oidInt4, -1), col(3, "name", 10, oidVarchar, 24))},
			{name: "int to bigint rewrites", cur: items(1, 15, col(2, "qty", 11, oidInt8, -1), col(3, "name", 10, oidVarchar, 24)), want: "column qty"},
			{name: "the backfill's base again", cur: items(1, 15, col(2, "qty", 11, oidInt8, -1)), base: "s3"},
			{name: "TRUNCATE: the stream's resync, not the watch's", cur: items(1, 16, col(2, "qty", 11, oidInt8, -1)), resync: true},
			{name: "a rewrite while waiting for that resync", cur: items(1, 17, col(2, "qty", 12, oidInt4, -1))},
			{name: "that resync's base", cur: items(1, 17, col(2, "qty", 12, oidInt4, -1)), base: "s4"},
			{name: "dropped and re-created: the identity check's case", cur: items(2, 30, col(2, "qty", 40, oidInt4, -1))},
			{name: "the new table's rewrite is compared with its own storage", cur: items(2, 31, col(2, "qty", 41, oidInt4, -1)), want: "column qty"},
		}},
		{"stop", PolicyStop, []step{
			{name: "backfill", cur: items(1, 10), base: "s1"},
			{name: "ALTER TYPE int USING", cur: items(1, 11, col(2, "qty", 9, oidInt4, -1)), want: "column qty", stopErr: failure.TableRewritten},
			{name: "asked again while it stands", cur: items(1, 11, col(2, "qty", 9, oidInt4, -1)), want: "column qty", stopErr: failure.TableRewritten},
			{name: "the resync's base", cur: items(1, 11, col(2, "qty", 9, oidInt4, -1)), base: "s2"},
			{name: "settled", cur: items(1, 11, col(2, "qty", 9, oidInt4, -1))},
		}},
		{"never recorded", "", []step{
			{name: "first sight is recorded", cur: items(1, 10)},
			{name: "then compared", cur: items(1, 11, col(2, "qty", 9, oidInt4, -1)), want: "column qty"},
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
			w := &Watcher{Pipeline: "p", Tables: []Table{{Name: plain, Policy: PolicyStop, OnRewrite: tt.policy}}, Store: store}
			cat := &catalog{}
			for _, s := range tt.steps {
				cat.plain = s.cur
				if s.base != "" {
					if err := RecordSnapshot(ctx, store, "p", plain, s.base, source.Storage{TableStorage: s.cur}, time.Now()); err != nil {
						t.Fatal(err)
					}
				}
				if s.resync {
					if err := w.Resyncing(ctx, plain, "TRUNCATE at 0/1:1"); err != nil {
						t.Fatal(err)
					}
				}
				got, err := w.Check(ctx, cat, nil, "at the table's RELATION at 0/2:1")
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
				if got[0].ErrType != failure.TableRewritten {
					t.Errorf("%s: error type %s, want %s", s.name, got[0].ErrType, failure.TableRewritten)
				}
				if stop := got[0].Policy == PolicyStop; stop != (s.stopErr != "") {
					t.Fatalf("%s: policy %s, want stop %v", s.name, got[0].Policy, s.stopErr != "")
				}
				if s.stopErr != "" {
					msg := got[0].StopMessage()
					for _, want := range []string{"public.items", "column qty", "at the table's RELATION at 0/2:1", "sluice resync --table public.items", "on_rewrite: resync"} {
						if !strings.Contains(msg, want) {
							t.Errorf("%s: the stop message does not say %q: %s", s.name, want, msg)
						}
					}
					continue
				}
				if err := w.Reacted(ctx, got[0]); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestWatcherOnlyAndPolicies: Check with only checks those tables; a table with both a rewrite
// and a partition change stops with the error of the policy that says stop.
func TestWatcherOnlyAndPolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name              string
		onPart, onRewrite Policy
		wantPolicy        Policy
		wantErr           string
	}{
		{"both resync", "", "", PolicyResync, failure.TableRewritten},
		{"partition stop", PolicyStop, "", PolicyStop, failure.PartitionChanged},
		{"rewrite stop", "", PolicyStop, PolicyStop, failure.TableRewritten},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store, err := staging.OpenDir(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			w := &Watcher{Pipeline: "p", Tables: []Table{{Name: root, Policy: tt.onPart, OnRewrite: tt.onRewrite}, {Name: plain}}, Store: store}
			cat := &catalog{parts: []source.Partition{part("ev_a", 1, 11)}, plain: items(1, 10)}
			if got, err := w.Check(ctx, cat, nil, "start"); err != nil || len(got) != 0 {
				t.Fatalf("first Check = %+v, %v", got, err)
			}
			// root: a partition dropped, and a rewrite of a column recorded with a rewrite of
			// its own storage (a root has none; forced here to test the choice of policy).
			rec, _, _, _ := reference(ctx, store, "p", root)
			rec.Storage = &source.TableStorage{OID: rootStorage.OID, RelFileNode: 1, Columns: []source.ColumnStamp{col(1, "id", 1, oidInt8, -1)}}
			if err := put(ctx, store, "p", readerName(root), rec); err != nil {
				t.Fatal(err)
			}
			cat.parts, cat.plain = nil, items(1, 11, col(2, "qty", 9, oidInt4, -1))
			got, err := w.Check(ctx, cat, []batch.TableName{root}, "RELATION")
			if err != nil || len(got) != 1 || got[0].Table != root {
				t.Fatalf("Check of root only = %+v, %v; want one reaction of root", got, err)
			}
			if got[0].Policy != tt.wantPolicy || got[0].ErrType != tt.wantErr {
				t.Errorf("reaction %s / %s, want %s / %s", got[0].Policy, got[0].ErrType, tt.wantPolicy, tt.wantErr)
			}
			if !strings.Contains(got[0].Reason, "column id") || !strings.Contains(got[0].Reason, "ev_a was detached") {
				t.Errorf("reason %q names not both changes", got[0].Reason)
			}
		})
	}
}

// TestWatcherSettledRecordsAWatchedBase: a table whose catalog matched its record is not read
// again while the catalog stays, but a backfill's new base is compared at once, even when the
// catalog is the same: a base older than the catalog (a rewrite after its snapshot) reacts.
func TestWatcherSettledRecordsAWatchedBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := staging.OpenDir(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &Watcher{Pipeline: "p", Tables: []Table{{Name: plain}}, Store: store}
	cat := &catalog{plain: items(1, 11, col(2, "qty", 9, oidInt4, -1))}
	for i := range 3 { // first sight, then settled
		if got, err := w.Check(ctx, cat, nil, "periodic"); err != nil || len(got) != 0 {
			t.Fatalf("check %d = %+v, %v; want none", i, got, err)
		}
	}
	if err := RecordSnapshot(ctx, store, "p", plain, "s1", source.Storage{TableStorage: items(1, 10)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := w.Check(ctx, cat, nil, "periodic")
	if err != nil || len(got) != 1 || !strings.Contains(got[0].Reason, "column qty") {
		t.Fatalf("check after a base older than the catalog = %+v, %v; want a rewrite of qty", got, err)
	}
}
