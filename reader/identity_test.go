package reader

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

func TestIdentityChange(t *testing.T) {
	t.Parallel()
	table := tableName("items")
	full := source.PublicationMark{Exists: true, Xmin: 700, ViaRoot: true}
	rec := identityRecord{RelID: 100, Member: "rel 1", Publication: full}
	with := func(f func(*identityRecord)) identityRecord {
		r := rec
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name     string
		rec      identityRecord
		now      source.TableMark
		pub      source.PublicationMark
		wantType string
		want     []string
	}{
		{name: "unchanged", rec: rec, now: source.TableMark{RelID: 100, Member: "rel 1"}, pub: full},
		{name: "re-created, back in the publication", rec: rec, now: source.TableMark{RelID: 200, Member: "rel 2"}, pub: full,
			wantType: failure.TableRecreated, want: []string{"dropped and re-created (relation OID 100 → 200)"}},
		{name: "re-created, out of the publication", rec: rec, now: source.TableMark{RelID: 200}, pub: full,
			wantType: failure.TableRecreated, want: []string{"relation OID 100 → 200", "the new table was not in publication p"}},
		{name: "dropped", rec: rec, now: source.TableMark{}, pub: full,
			wantType: failure.TableRecreated, want: []string{"dropped (relation OID 100 no longer exists)"}},
		{name: "left the publication", rec: rec, now: source.TableMark{RelID: 100}, pub: full,
			wantType: failure.PublicationChanged, want: []string{"left publication p"}},
		{name: "left and joined again", rec: rec, now: source.TableMark{RelID: 100, Member: "rel 9"}, pub: full,
			wantType: failure.PublicationChanged, want: []string{"left publication p and joined it again (membership rel 1 → rel 9)"}},
		{name: "joined while recorded out", rec: with(func(r *identityRecord) { r.Member = "" }), now: source.TableMark{RelID: 100, Member: "rel 9"}, pub: full,
			wantType: failure.PublicationChanged, want: []string{"membership none → rel 9"}},
		{name: "a FOR ALL TABLES member stays", rec: with(func(r *identityRecord) { r.Member = source.MemberAllTables }),
			now: source.TableMark{RelID: 100, Member: source.MemberAllTables}, pub: full},
		{name: "flags off now", rec: rec, now: source.TableMark{RelID: 100, Member: "rel 1"},
			pub:      source.PublicationMark{Exists: true, Xmin: 701, ViaRoot: true, Unpublished: []string{"delete", "truncate"}},
			wantType: failure.PublicationChanged, want: []string{"publication p does not publish delete, truncate"}},
		{name: "flags off and on between two checks", rec: rec, now: source.TableMark{RelID: 100, Member: "rel 1"},
			pub:      source.PublicationMark{Exists: true, Xmin: 702, ViaRoot: true},
			wantType: failure.PublicationChanged, want: []string{"publication p was altered", "xmin 700 → 702", "publish flags may have been off"}},
		{name: "flags seen off, back on", rec: with(func(r *identityRecord) {
			r.Publication = source.PublicationMark{Exists: true, Xmin: 701, ViaRoot: true, Unpublished: []string{"delete"}}
		}), now: source.TableMark{RelID: 100, Member: "rel 1"}, pub: source.PublicationMark{Exists: true, Xmin: 702, ViaRoot: true},
			wantType: failure.PublicationChanged, want: []string{"publication p did not publish delete and does again"}},
		{name: "via root turned off", rec: rec, now: source.TableMark{RelID: 100, Member: "rel 1"},
			pub:      source.PublicationMark{Exists: true, Xmin: 703},
			wantType: failure.PublicationChanged, want: []string{"publish_via_partition_root changed from true to false"}},
		{name: "publication dropped", rec: rec, now: source.TableMark{RelID: 100}, pub: source.PublicationMark{},
			wantType: failure.PublicationChanged, want: []string{"publication p no longer exists"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gotType, what := identityChange(table, "p", tc.rec, tc.now, tc.pub)
			if gotType != tc.wantType {
				t.Fatalf("type %q (%s), want %q", gotType, what, tc.wantType)
			}
			if tc.wantType == "" && what != "" {
				t.Fatalf("no change wanted, got %q", what)
			}
			for _, w := range tc.want {
				if !strings.Contains(what, w) {
					t.Errorf("%q does not say %q", what, w)
				}
			}
		})
	}
}

// identityFetcher is a fakeFetcher whose catalog the test sets.
type identityFetcher struct {
	fakeFetcher
	mu  sync.Mutex
	cat source.Identity
}

func (f *identityFetcher) Identity(_ context.Context, _ string, tables []batch.TableName) (source.Identity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := source.Identity{At: f.cat.At, Publication: f.cat.Publication, Tables: map[batch.TableName]source.TableMark{}}
	for _, t := range tables {
		out.Tables[t] = f.cat.Tables[t]
	}
	return out, nil
}

func (f *identityFetcher) set(at uint64, pub source.PublicationMark, m source.TableMark) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cat = source.Identity{At: at, Publication: pub, Tables: map[batch.TableName]source.TableMark{tableName("items"): m}}
}

// stopTables is a Tables and TableStopper that records every reaction.
type stopTables struct {
	mu        sync.Mutex
	reactions []string // "stop <type>: <msg>" or "resync"
}

func (s *stopTables) SignalBatches(context.Context, batch.Schema, []staging.BatchRef) error {
	return nil
}
func (s *stopTables) Resync(context.Context, batch.Schema) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reactions = append(s.reactions, "resync")
	return nil
}

func (s *stopTables) Stop(_ context.Context, _ batch.Schema, errType, msg, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reactions = append(s.reactions, "stop "+errType+": "+msg)
	return nil
}

func (s *stopTables) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.reactions
	s.reactions = nil
	return out
}

// TestIdentityReactsOnceAndSkipsReplayedRelations walks one table through a re-creation seen by
// the catalog, one seen at a RELATION, replays of the RELATIONs from before each, a restart
// (the records persist) and a publication toggle: each change makes the table react once as
// tables[].on_recreate says, and nothing else does.
func TestIdentityReactsOnceAndSkipsReplayedRelations(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"", RecreateResync} {
		t.Run("on_recreate="+policy, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store, err := staging.OpenDir(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			items := tableName("items")
			full := source.PublicationMark{Exists: true, Xmin: 700, ViaRoot: true}
			f := &identityFetcher{}
			f.set(1000, full, source.TableMark{RelID: 100, Member: "rel 1"})
			tables := &stopTables{}
			republished := 0
			start := func() *run {
				t.Helper()
				r, err := newRun(ctx, Config{Pipeline: "p", Source: testSource, Publication: "pub", Schemas: []batch.Schema{testSchema("items")},
					OnRecreate: map[batch.TableName]string{items: policy}},
					Deps{Store: nil, Tables: tables, Identities: store,
						OpenFetcher: func(context.Context) (Fetcher, error) { return f, nil },
						Republish: func(context.Context) ([]batch.TableName, error) {
							republished++
							f.mu.Lock()
							m := f.cat.Tables[items]
							m.Member = "rel 2"
							f.cat.Tables[items] = m
							f.mu.Unlock()
							return []batch.TableName{items}, nil
						}}, f)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.loadIdentities(ctx); err != nil {
					t.Fatal(err)
				}
				return r
			}
			expect := func(step string, want ...string) {
				t.Helper()
				got := tables.take()
				if len(got) != len(want) {
					t.Fatalf("%s: reactions %q, want %d like %q", step, got, len(want), want)
				}
				for i, w := range want {
					for _, part := range strings.Split(w, "|") {
						if !strings.Contains(got[i], part) {
							t.Errorf("%s: reaction %q does not say %q", step, got[i], part)
						}
					}
				}
			}
			react := func(errType string, says ...string) string {
				if policy == RecreateResync {
					return "resync"
				}
				return strings.Join(append([]string{"stop " + errType}, says...), "|")
			}
			r := start()
			relation := func(oid uint32, lsn uint64) {
				t.Helper()
				if err := r.relationSeen(ctx, &source.RelationEvent{Table: items, RelationID: oid, Pos: pos(lsn)}); err != nil {
					t.Fatal(err)
				}
			}
			periodic := func() {
				t.Helper()
				if err := r.checkIdentity(ctx, "by the periodic catalog check", []batch.TableName{items}); err != nil {
					t.Fatal(err)
				}
			}

			periodic()
			expect("first check (no record: upgrade)")
			relation(100, 900)
			expect("RELATION of the recorded table")

			f.set(2000, full, source.TableMark{RelID: 200}) // dropped and re-created: out of the publication
			periodic()
			expect("re-created", react(failure.TableRecreated, "relation OID 100 → 200", "(the reader added it back)",
				"sluice resync --table public.items", "by the periodic catalog check"))
			if republished != 1 {
				t.Errorf("the table out of the publication was added back %d times, want once", republished)
			}
			periodic()
			expect("the same re-creation, checked again")
			relation(100, 1500) // the slot restarted behind the re-creation
			expect("a replayed RELATION of the dropped table")
			relation(200, 2100)
			expect("the new table's RELATION")

			f.set(2300, full, source.TableMark{RelID: 300, Member: "rel 2"})
			relation(300, 2200) // re-created again (and back in the publication), seen first in the WAL
			expect("re-created again", react(failure.TableRecreated, "relation OID 200 → 300", "at its RELATION at 0/898"))
			relation(200, 2150)
			expect("a replayed RELATION of the second table")

			r.close(ctx)
			r = start() // a new run reads the records
			periodic()
			expect("restarted")

			f.set(3100, source.PublicationMark{Exists: true, Xmin: 703, ViaRoot: true}, source.TableMark{RelID: 300, Member: "rel 2"})
			periodic()
			expect("publish flags toggled", react(failure.PublicationChanged, "publication pub was altered"))
			periodic()
			expect("the same toggle, checked again")

			f.set(3200, source.PublicationMark{Exists: true, Xmin: 703, ViaRoot: true}, source.TableMark{}) // dropped, not created again
			periodic()
			expect("dropped", "stop "+failure.TableRecreated+"|dropped (relation OID 300 no longer exists)|Create it again and resync it: sluice resync --table public.items")
			if republished != 1 {
				t.Errorf("a dropped table was added back to the publication: %d calls", republished)
			}
			r.close(ctx)
		})
	}
}
