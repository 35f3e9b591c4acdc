package source

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicecdc/sluice/batch"
)

// TestSnapshotExactUnderConcurrentWrites checks the rule that splits the stream at a snapshot:
// replaying the stream's changes with commit LSN below S on the rows before the stream gives
// exactly the snapshot, and replaying the changes at or after S on the snapshot gives exactly the
// final table, key by key. Writers run before, during and after the snapshot is taken.
func TestSnapshotExactUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "CREATE TABLE acct (region int, id int, balance bigint, note text, PRIMARY KEY (region, id))")
	db.exec(t, "INSERT INTO acct SELECT g % 3, g, g * 10, 'seed' FROM generate_series(1, 3000) g")
	cfg := db.config(t, "acct")
	info := setup(t, cfg)
	schema := info.Schemas[0]
	initial := db.tableRows(t, schema)

	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg     sync.WaitGroup
		writes atomic.Int64
	)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			if err := write(ctx, db.dsn, rand.New(rand.NewPCG(seed, seed)), &writes); err != nil {
				t.Error(err)
			}
		}(uint64(w))
	}
	waitFor(t, "writers to start", func() bool { return writes.Load() > 200 })
	snap, err := OpenSnapshot(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(context.Background())
	atSnapshot := writes.Load()
	waitFor(t, "writes after the snapshot", func() bool { return writes.Load() > atSnapshot+300 })
	// Reading while the writers go on: the snapshot must not see their changes.
	rows := readAll(t, snap, schema, 97)
	cancel()
	wg.Wait()
	final := db.tableRows(t, schema)

	s := snap.LSN()
	snapRows := rowMap{}
	snapRows.apply(t, schema.KeyIndexes(), rows)
	for i, r := range rows {
		if r.Op != batch.OpSnapshot || r.Pos != (batch.Position{LSN: s}) {
			t.Fatalf("row %d: op %s pos %s, want snapshot-read at (S, 0) = %s:0", i, r.Op, r.Pos, formatLSN(s))
		}
		if i > 0 && len(snapRows) != len(rows) {
			t.Fatalf("chunks overlap: %d rows, %d distinct keys", len(rows), len(snapRows))
		}
	}

	evs := stream(t, cfg, info.Schemas, db.walLSN(t))
	var before, after []batch.Change
	for _, c := range changesOf(evs, "public.acct") {
		if c.Pos.LSN < s {
			before = append(before, c)
		} else {
			after = append(after, c)
		}
		if (c.Pos.LSN >= s) != (batch.Position{LSN: s}).Less(c.Pos) {
			t.Fatalf("position %s: commit LSN rule and position order disagree around %s", c.Pos, formatLSN(s))
		}
	}
	if len(before) == 0 || len(after) == 0 {
		t.Fatalf("writers must change rows on both sides of the snapshot: %d before, %d after", len(before), len(after))
	}
	t.Logf("snapshot at %s: %d rows; %d stream changes before it, %d after", formatLSN(s), len(rows), len(before), len(after))

	atS := initial.clone()
	atS.apply(t, schema.KeyIndexes(), before)
	if d := snapRows.diff(atS); d != "" {
		t.Errorf("snapshot differs from the rows replayed up to its LSN (gap or overlap):\n%s", d)
	}
	end := snapRows.clone()
	end.apply(t, schema.KeyIndexes(), after)
	if d := end.diff(final); d != "" {
		t.Errorf("snapshot + later stream differs from the final table:\n%s", d)
	}
}

// write runs small random transactions until ctx ends.
func write(ctx context.Context, dsn string, rnd *rand.Rand, n *atomic.Int64) error {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for ctx.Err() == nil {
		tx, err := conn.Begin(context.Background())
		if err != nil {
			return err
		}
		for i := 0; i < 1+rnd.IntN(4); i++ {
			id := 1 + rnd.IntN(4000)
			var sql string
			switch rnd.IntN(4) {
			case 0:
				sql = fmt.Sprintf("INSERT INTO acct VALUES (%d, %d, %d, 'ins') ON CONFLICT (region, id) DO UPDATE SET balance = EXCLUDED.balance", id%3, id, rnd.IntN(1000))
			case 1:
				sql = fmt.Sprintf("DELETE FROM acct WHERE region = %d AND id = %d", id%3, id)
			case 2:
				sql = fmt.Sprintf("UPDATE acct SET region = (region + 1) %% 3 WHERE region = %d AND id = %d AND NOT EXISTS (SELECT 1 FROM acct WHERE region = (%d + 1) %% 3 AND id = %d)", id%3, id, id%3, id)
			default:
				sql = fmt.Sprintf("UPDATE acct SET balance = balance + 1, note = 'upd' WHERE id = %d", id)
			}
			if _, err = tx.Exec(context.Background(), sql); err != nil {
				break
			}
		}
		if err != nil {
			_ = tx.Rollback(context.Background())
			// Writers race each other: a deadlock or a key taken meanwhile just skips the
			// transaction.
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "23505") {
				continue
			}
			return err
		}
		if err := tx.Commit(context.Background()); err != nil {
			return err
		}
		n.Add(1)
	}
	return nil
}

// waitFor polls cond until it holds, failing the test after 30 s with the reason.
func waitFor(t *testing.T, reason string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", reason)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSnapshotEstimate checks the row estimate, never analyzed and analyzed, and the source
// identity the snapshot reports.
func TestSnapshotEstimate(t *testing.T) {
	t.Parallel()
	db := newTestDB(t,
		"CREATE TABLE e (id int PRIMARY KEY)",
		"INSERT INTO e SELECT generate_series(1, 1234)")
	cfg := db.config(t, "e")
	info := setup(t, cfg)
	table := cfg.Tables[0].Table
	ctx := context.Background()
	snap, err := OpenSnapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The snapshot identifies the source on its own connection: the position it becomes is
	// compared with every stored one, so it must be the slot's identity exactly.
	if got := snap.Source(); got != info.ID {
		t.Errorf("snapshot's source %+v, want the slot's %+v", got, info.ID)
	}
	n, err := snap.Estimate(ctx, table)
	if err != nil || n != 1234 {
		t.Errorf("never analyzed: estimate %d (%v), want the exact count 1234", n, err)
	}
	snap.Close(ctx)
	db.exec(t, "INSERT INTO e SELECT generate_series(1235, 2000)")
	db.exec(t, "ANALYZE e")
	if snap, err = OpenSnapshot(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	if n, err = snap.Estimate(ctx, table); err != nil || n != 2000 {
		t.Errorf("analyzed: estimate %d (%v), want reltuples 2000", n, err)
	}
}
