package workload

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestGeneratorIsReproducibleAndTracksKeys runs the same seed on two databases: they must end
// identical, the generator's live keys must be exactly the source's keys, the source must hold
// a TOASTed value and every kind with a non-NULL value, and the partitioned table must have
// gained its partitions and moved rows between them.
func TestGeneratorIsReproducibleAndTracksKeys(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const seed = 20261130
	run := func() (*Generator, string) {
		dsn := testenv.NewDatabase(t)
		g := New(dsn, seed)
		t.Cleanup(func() { _ = g.Close(context.Background()) })
		if err := g.Create(ctx); err != nil {
			t.Fatal(err)
		}
		for _, tb := range g.Tables() {
			if err := g.Fill(ctx, tb.Name, 300); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Run(ctx, RunOptions{Ops: 300, LargeTxRows: 2000}); err != nil {
			t.Fatal(err)
		}
		return g, dsn
	}
	g1, dsn1 := run()
	g2, dsn2 := run()
	st := g1.Stats()
	t.Logf("seed %d: %s", seed, st)
	if st.Inserted == 0 || st.Updated == 0 || st.Deleted == 0 || st.KeyChanges == 0 || st.MultiTableTx == 0 || st.LargeTxRows != 2000 {
		t.Errorf("seed %d: some operation never ran: %s", seed, st)
	}
	if st.PartitionMoves == 0 || st.PartitionsAdded != 2 {
		t.Errorf("seed %d: want rows moved between partitions and 2 partitions added: %s", seed, st)
	}
	var attached int
	if err := g1.conn.QueryRow(ctx, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'public.wl_parts'::regclass").Scan(&attached); err != nil {
		t.Fatal(err)
	}
	if attached != g1.Partitions("wl_parts") || attached != 4 {
		t.Errorf("seed %d: wl_parts has %d partitions, the generator counts %d; want 4", seed, attached, g1.Partitions("wl_parts"))
	}
	if st != g2.Stats() {
		t.Errorf("seed %d: same seed, different operations: %s and %s", seed, st, g2.Stats())
	}
	for _, tb := range g1.Tables() {
		src1, err := ReadSource(ctx, dsn1, tb)
		if err != nil {
			t.Fatal(err)
		}
		src2, err := ReadSource(ctx, dsn2, tb)
		if err != nil {
			t.Fatal(err)
		}
		if r := Compare(tb, src1, src2, nil, 5); !r.Equal() {
			t.Errorf("seed %d: the same seed wrote different rows: %s", seed, r)
		}
		var live []Row
		for _, k := range g1.Live(tb.Name) {
			live = append(live, Row{Key: k})
		}
		keysOnly := func(rows []Row) []string {
			var out []string
			for _, r := range rows {
				out = append(out, r.Key.String())
			}
			sort.Strings(out)
			return out
		}
		got, want := keysOnly(live), keysOnly(src1)
		if len(got) != len(want) {
			t.Fatalf("seed %d table %s: generator tracks %d live keys, source has %d", seed, tb.Name, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("seed %d table %s: tracked key %s, source key %s", seed, tb.Name, got[i], want[i])
			}
		}
		for i, c := range tb.Columns {
			nonNull := false
			for _, r := range src1 {
				if r.Values[i] != Null {
					nonNull = true
					if c.Toast && len(r.Values[i]) < 8192 {
						t.Errorf("seed %d: %s.%s holds %d bytes, want > 8 KiB (TOASTed)", seed, tb.Name, c.Name, len(r.Values[i]))
					}
					break
				}
			}
			if !nonNull {
				t.Errorf("seed %d: %s.%s (%s) never holds a value", seed, tb.Name, c.Name, c.Kind)
			}
		}
	}
}
