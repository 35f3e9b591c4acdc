package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/couchbase/gocb/v2"
	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	chsink "github.com/sluicecdc/sluice/sinks/clickhouse"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// ctxSeed is the number of backfilled rows in the context-column tests.
const ctxSeed = 300

// contextRow is what a test reads of one row's context columns: commit time (nil for NULL) and
// phase, as the sink holds them under the names the pipeline gave them.
type contextRow struct {
	committedAt *time.Time
	phase       string
}

// streamWindow is a transaction written during a test, with the Postgres clock read just before
// it and just after its commit, and the WAL end before and after it.
type streamWindow struct {
	before, after       time.Time
	lsnBefore, lsnAfter uint64
}

// writeStreamed runs stmts as one transaction on the pipeline's source and returns its window.
func (p *icebergPipeline) writeStreamed(ctx context.Context, stmts ...string) streamWindow {
	p.t.Helper()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		p.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var w streamWindow
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp(), pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&w.before, &w.lsnBefore); err != nil {
		p.t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "BEGIN; "+strings.Join(stmts, "; ")+"; COMMIT"); err != nil {
		p.t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp(), pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&w.after, &w.lsnAfter); err != nil {
		p.t.Fatal(err)
	}
	return w
}

// TestContextColumnsOnClickHouseAndCouchbase is TestContextColumnsOnlyNamedWithPhaseAndCommitTime
// on the two other sinks. The pipeline names {from: commit_ts, as: committed_at} and {from: phase,
// as: source_phase}. ClickHouse: system.columns of the target lists exactly the source's columns,
// committed_at, source_phase and the sink's own bookkeeping columns (_version, _is_deleted,
// _sluice_marker, _sluice_position): no other context column, under no name. Couchbase: every
// document's members are exactly the source's columns, committed_at and source_phase. In both,
// backfilled rows have phase snapshot and a null commit time, and the rows of a streamed
// transaction phase stream and a commit time inside the transaction's window on the Postgres clock
// (to the second where the sink's type holds seconds only).
func TestContextColumnsOnClickHouseAndCouchbase(t *testing.T) {
	defer parallel(t)()
	t.Run("clickhouse", func(t *testing.T) {
		defer parallel(t)()
		addr := testenv.ClickHouse(t)
		p, read := clickhousePipeline(t, itemsDDL, itemsSeed(1, ctxSeed))
		db := p.cfg.Sink.ClickHouse.Database
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.Native, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		checkContextColumns(t, p, read,
			func(ctx context.Context) ([]string, error) {
				rows, err := conn.Query(ctx, "SELECT name FROM system.columns WHERE database = ? AND table = 'items' ORDER BY position", db)
				if err != nil {
					// Servers before system.columns.position: the declaration order is not needed.
					rows, err = conn.Query(ctx, "SELECT name FROM system.columns WHERE database = ? AND table = 'items'", db)
				}
				if err != nil {
					return nil, err
				}
				defer rows.Close()
				var names []string
				for rows.Next() {
					var n string
					if err := rows.Scan(&n); err != nil {
						return nil, err
					}
					names = append(names, n)
				}
				slices.Sort(names)
				return names, rows.Err()
			},
			[]string{chsink.ColVersion, chsink.ColDeleted, chsink.ColMarker, chsink.ColPosition},
			func(ctx context.Context) (map[string]contextRow, error) {
				rows, err := conn.Query(ctx, fmt.Sprintf("SELECT toString(id), committed_at, source_phase FROM %s.items FINAL WHERE %s = 0 AND %s = 0",
					db, chsink.ColDeleted, chsink.ColMarker))
				if err != nil {
					return nil, err
				}
				defer rows.Close()
				out := map[string]contextRow{}
				for rows.Next() {
					var id, phase string
					var at *time.Time
					if err := rows.Scan(&id, &at, &phase); err != nil {
						return nil, err
					}
					out[id] = contextRow{committedAt: at, phase: phase}
				}
				return out, rows.Err()
			})
	})
	t.Run("couchbase", func(t *testing.T) {
		defer parallel(t)()
		cb := testenv.Couchbase(t)
		universe := keys([2]int{1, ctxSeed}, [2]int{1001, 1050})
		p, read := couchbasePipeline(t, universe, itemsDDL, itemsSeed(1, ctxSeed))
		scope, _, _ := strings.Cut(p.cfg.Tables[0].Target, ".")
		bucket := couchbaseBucket(t, cb)
		// docs reads every document of the universe as its members.
		docs := func(ctx context.Context) (map[string]map[string]json.RawMessage, error) {
			col := bucket.Scope(scope).Collection("items")
			out := map[string]map[string]json.RawMessage{}
			for _, k := range universe {
				res, err := col.Get(k, &gocb.GetOptions{Context: ctx})
				if errors.Is(err, gocb.ErrDocumentNotFound) {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("get %s: %w", k, err)
				}
				var m map[string]json.RawMessage
				if err := res.Content(&m); err != nil {
					return nil, fmt.Errorf("document %s: %w", k, err)
				}
				out[k] = m
			}
			return out, nil
		}
		checkContextColumns(t, p, read,
			func(ctx context.Context) ([]string, error) {
				all, err := docs(ctx)
				if err != nil {
					return nil, err
				}
				// Every document must have the same members; report the first one's, or a
				// difference as an error.
				var names []string
				for k, m := range all {
					var n []string
					for f := range m {
						n = append(n, f)
					}
					slices.Sort(n)
					if names != nil && !slices.Equal(n, names) {
						return nil, fmt.Errorf("document %s has members %v, another one %v", k, n, names)
					}
					names = n
				}
				return names, nil
			}, nil,
			func(ctx context.Context) (map[string]contextRow, error) {
				all, err := docs(ctx)
				if err != nil {
					return nil, err
				}
				out := map[string]contextRow{}
				for k, m := range all {
					var r struct {
						CommittedAt *time.Time `json:"committed_at"`
						Phase       string     `json:"source_phase"`
					}
					b, _ := json.Marshal(m)
					if err := json.Unmarshal(b, &r); err != nil {
						return nil, fmt.Errorf("document %s: %w", k, err)
					}
					out[k] = contextRow{committedAt: r.CommittedAt, phase: r.Phase}
				}
				return out, nil
			})
	})
}

// checkContextColumns runs the pipeline, streams one transaction (50 inserts and an update of id
// 1) and checks the target's columns (columns, sorted, minus internal) and the rows' context
// values.
func checkContextColumns(t *testing.T, p *icebergPipeline, read sinkReader,
	columns func(ctx context.Context) ([]string, error), internal []string,
	values func(ctx context.Context) (map[string]contextRow, error)) {
	ctx := context.Background()
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	w := p.writeStreamed(ctx, itemsSeed(1001, 1050), `UPDATE public.items SET qty = -1 WHERE id = 1`)
	p.waitEqualTo("public.items", "id", e2eColumns, read)

	names, err := columns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{"id", "committed_at", "source_phase"}, itemColumns...)
	want = append(want, internal...)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("the target has columns %v, want exactly %v", names, want)
	}

	got, err := values(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var nSnap, nStream int
	for k, r := range got {
		id, _ := strconv.Atoi(k)
		if id <= ctxSeed && id != 1 {
			nSnap++
			if r.phase != "snapshot" || r.committedAt != nil {
				t.Fatalf("backfilled row %s has source_phase %q committed_at %v; want snapshot and null", k, r.phase, r.committedAt)
			}
			continue
		}
		nStream++
		if r.phase != "stream" || r.committedAt == nil {
			t.Fatalf("streamed row %s has source_phase %q committed_at %v; want stream and a time", k, r.phase, r.committedAt)
		}
		// A sink that holds seconds only truncates toward the past.
		if at := *r.committedAt; at.Before(w.before.Truncate(time.Second)) || at.After(w.after) {
			t.Fatalf("streamed row %s committed_at %s is outside its transaction [%s, %s]", k, at.UTC().Format(time.RFC3339Nano),
				w.before.UTC().Format(time.RFC3339Nano), w.after.UTC().Format(time.RFC3339Nano))
		}
	}
	if nSnap != ctxSeed-1 || nStream != 51 {
		t.Fatalf("%d backfilled and %d streamed rows, want %d and 51", nSnap, nStream, ctxSeed-1)
	}
}

// allSixMetadata names every context column, under names of the test's choosing.
const allSixMetadata = `    metadata:
      - {from: op, as: src_op}
      - {from: pos, as: src_pos}
      - {from: commit_ts, as: committed_at}
      - {from: ingest_ts, as: ingested_at}
      - {from: snapshot, as: snapshot_lsn}
      - {from: phase, as: source_phase}
`

// TestAllSixContextColumnsHoldTheirValues names all six context columns on Iceberg and checks
// the value of each, row by row, after a backfill and two streamed transactions (inserts and an
// update in the first, an update in the second):
//
//   - op: snapshot-read for backfilled rows, insert for inserted rows, update for updated ones;
//   - pos: backfilled rows at the snapshot's LSN; the rows of a transaction share one LSN inside
//     the WAL window of that transaction, with sequences in statement order, the second
//     transaction after the first; the table's committed position equals the last change's pos;
//   - commit_ts: null for backfilled rows, inside the transaction's window for streamed ones;
//   - ingest_ts: after the test started and not after now, and not before the row's commit time;
//   - snapshot: the same LSN on every backfilled row (the pos LSN of those rows), null on streamed;
//   - phase: snapshot or stream.
func TestAllSixContextColumnsHoldTheirValues(t *testing.T) {
	defer parallel(t)()
	started := time.Now()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, ctxSeed))
	p.nameMetadata(allSixMetadata)
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)

	ctx := context.Background()
	w1 := p.writeStreamed(ctx, itemsSeed(1001, 1050), `UPDATE public.items SET qty = -1 WHERE id = 1`)
	w2 := p.writeStreamed(ctx, `UPDATE public.items SET qty = -2 WHERE id = 2`)
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
	sink := p.icebergSink()
	committed, ok := p.sinkPosition(ctx, sink, "raw.items")
	if !ok {
		t.Fatal("raw.items has no committed position")
	}

	cols := []string{"id", "src_op", "src_pos", "committed_at", "ingested_at", "snapshot_lsn", "source_phase"}
	got, err := localrun.ScanIceberg(ctx, p.cfg, "raw.items", "id", cols)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	parseTS := func(k, name, s string) time.Time {
		at, err := time.Parse("2006-01-02T15:04:05.000000Z", s)
		if err != nil {
			t.Fatalf("row %s: %s %q: %v", k, name, s, err)
		}
		return at
	}
	var snapLSN string
	var last batch.Position
	tx1 := map[int]batch.Position{}
	for k, r := range got.Rows {
		op, posText, commitTS, ingestTS, snap, phase := r[1], r[2], r[3], r[4], r[5], r[6]
		pos, err := batch.ParsePosition(posText)
		if err != nil {
			t.Fatalf("row %s: src_pos %q: %v", k, posText, err)
		}
		ingested := parseTS(k, "ingested_at", ingestTS)
		if ingested.Before(started.Truncate(time.Microsecond)) || ingested.After(now) {
			t.Fatalf("row %s ingested_at %s is not between the test's start %s and now %s", k, ingestTS,
				started.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
		}
		id, _ := strconv.Atoi(k)
		if id <= ctxSeed && id > 2 {
			if op != "snapshot-read" || phase != "snapshot" || commitTS != "NULL" || snap == "NULL" {
				t.Fatalf("backfilled row %s has op %q phase %q commit_ts %s snapshot %s; want snapshot-read, snapshot, NULL and an LSN",
					k, op, phase, commitTS, snap)
			}
			if snapLSN == "" {
				snapLSN = snap
			}
			if snap != snapLSN || !strings.HasPrefix(posText, snap+":") {
				t.Fatalf("backfilled row %s has snapshot %s and pos %s; every backfilled row must carry the one snapshot LSN (%s) in both",
					k, snap, posText, snapLSN)
			}
			continue
		}
		w, wantOp := w1, "insert"
		switch id {
		case 1:
			wantOp = "update"
		case 2:
			w, wantOp = w2, "update"
		}
		if op != wantOp || phase != "stream" || snap != "NULL" {
			t.Fatalf("streamed row %s has op %q phase %q snapshot %s; want %s, stream and NULL", k, op, phase, snap, wantOp)
		}
		if pos.LSN <= w.lsnBefore || pos.LSN > w.lsnAfter {
			t.Fatalf("streamed row %s has pos %s, outside its transaction's WAL window (%X, %X]", k, posText, w.lsnBefore, w.lsnAfter)
		}
		at := parseTS(k, "committed_at", commitTS)
		if at.Before(w.before.Truncate(time.Microsecond)) || at.After(w.after) {
			t.Fatalf("streamed row %s committed_at %s is outside its transaction [%s, %s]", k, commitTS,
				w.before.UTC().Format(time.RFC3339Nano), w.after.UTC().Format(time.RFC3339Nano))
		}
		if ingested.Before(at) {
			t.Fatalf("streamed row %s was ingested at %s, before its commit at %s", k, ingestTS, commitTS)
		}
		if last.Less(pos) {
			last = pos
		}
		if id != 2 {
			tx1[id] = pos
		}
	}
	if snapLSN == "" || len(tx1) != 51 {
		t.Fatalf("found snapshot LSN %q and %d rows of the first transaction, want an LSN and 51", snapLSN, len(tx1))
	}
	// The first transaction: one LSN, inserts in id order, then the update of id 1.
	for id := 1002; id <= 1050; id++ {
		if prev, cur := tx1[id-1], tx1[id]; cur.LSN != prev.LSN || !prev.Less(cur) {
			t.Fatalf("rows %d and %d of one transaction have pos %s and %s; want one LSN, in statement order", id-1, id, prev, cur)
		}
	}
	if u := tx1[1]; u.LSN != tx1[1050].LSN || !tx1[1050].Less(u) {
		t.Fatalf("the update of id 1 has pos %s, want it after the inserts of its transaction (last %s)", u, tx1[1050])
	}
	if snap, err := batch.ParsePosition(snapLSN + ":0"); err != nil || !snap.Less(tx1[1001]) {
		t.Fatalf("snapshot LSN %s (%v) is not before the first streamed change %s", snapLSN, err, tx1[1001])
	}
	if committed.Position != last {
		t.Fatalf("raw.items's committed position is %s, want the last change's pos %s", committed.Position, last)
	}
	t.Logf("snapshot LSN %s; first transaction at %s; committed position %s", snapLSN, tx1[1001], committed)
}

// nameMetadata replaces the metadata list the pipeline helpers write for every table with
// metadata (YAML lines under a table, indented by four spaces) and reloads the config.
func (p *icebergPipeline) nameMetadata(metadata string) {
	p.t.Helper()
	b, err := os.ReadFile(p.config)
	if err != nil {
		p.t.Fatal(err)
	}
	const helpers = "    metadata:\n      - {from: commit_ts, as: committed_at}\n      - {from: phase, as: source_phase}\n"
	if !strings.Contains(string(b), helpers) {
		p.t.Fatalf("the pipeline's config has no metadata list of the helpers to replace:\n%s", b)
	}
	if err := os.WriteFile(p.config, []byte(strings.ReplaceAll(string(b), helpers, metadata)), 0o644); err != nil {
		p.t.Fatal(err)
	}
	cfg, err := config.Load(p.config)
	if err != nil {
		p.t.Fatalf("the config with all six metadata columns does not load: %v", err)
	}
	p.cfg = cfg
}
