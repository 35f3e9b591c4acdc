package tests

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/couchbase/gocb/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/testkit/testenv"
	"github.com/sluicecdc/sluice/workflows"
)

// poisonSeed is the number of rows each of public.a and public.b starts with.
const poisonSeed = 500

// poisonCase is one sink's poison scenario: a pipeline of public.a and public.b into the sink,
// readers of both targets, what breaks the sink for public.a, the rows that meet the break, what
// the PoisonBatch error must name, and the operator's fix.
type poisonCase struct {
	name string
	// open creates the pipeline and returns it with the readers of a's and b's targets and the
	// targets' names as the config writes them.
	open func(t *testing.T) (p *icebergPipeline, readA, readB sinkReader, targetA string)
	// breakSink is what the operator does to the sink before the poisoned writes (may be nil).
	breakSink func(t *testing.T, ctx context.Context)
	// poisonSQL is public.a's part of poisoned transaction i.
	poisonSQL func(i int) string
	wantInErr []string
	// fix is the operator's fix, done before `sluice resume --table public.a`.
	fix func(t *testing.T, ctx context.Context, p *icebergPipeline)
	// backfills says whether the resumed run backfills (the fix discarded the target) or resumes
	// from the committed position.
	backfills bool
}

// TestPoisonBatchOnClickHouseAndCouchbase is TestPoisonBatchStopsOneTableAndResumeConverges on
// the two other sinks, each with a poison that sink really rejects:
//
//   - ClickHouse: the operator retypes the target's qty column to Nullable(String) in ClickHouse;
//     the next batch of public.a carries integers for it and the insert is rejected. The fix is in
//     place: retype the column back to Nullable(Int32) and resume; the new run resumes from the
//     committed position (no backfill: the old rows are still there) and converges.
//   - Couchbase: a row of public.a grows to 21 MiB, over Couchbase's 20 MiB document limit. The
//     staged batch holds that row, so the fix is the one the error names: shrink the row in
//     Postgres, drop the target collection, resume; Sluice creates the collection again, discards
//     its checkpoint, backfills and streams.
//
// In both, the poisoned table's workflow fails with the non-retryable PoisonBatch error naming the
// table and the cause, its committed position (read from the sink) stays at or before the WAL end
// taken before the poisoned writes and does not move, the sink keeps its old rows, and public.b,
// written in the same transactions, keeps streaming and converges.
func TestPoisonBatchOnClickHouseAndCouchbase(t *testing.T) {
	defer parallel(t)()
	for _, tc := range []poisonCase{clickhousePoison(), couchbasePoison()} {
		t.Run(tc.name, func(t *testing.T) {
			defer parallel(t)()
			runPoison(t, tc)
		})
	}
}

func runPoison(t *testing.T, tc poisonCase) {
	ctx := context.Background()
	p, readA, readB, targetA := tc.open(t)
	p.worker("worker")
	p.sluice("start")
	p.waitStream(tableA)
	p.waitStream(tableB)
	p.waitEqualTo("public.a", "id", twoTableColumns, readA)
	p.waitEqualTo("public.b", "id", twoTableColumns, readB)

	sink, err := pipeline.Open(ctx, p.cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	position := func() (batch.SourcePosition, bool) {
		pos, ok, err := sink.Position(ctx, sinks.TableSpec{Target: targetA})
		if err != nil {
			t.Fatalf("reading the committed position of %s: %v", targetA, err)
		}
		return pos, ok
	}

	before := p.currentLSN(ctx)
	if tc.breakSink != nil {
		tc.breakSink(t, ctx)
	}
	for i := 0; i < 3; i++ {
		p.exec(fmt.Sprintf(`BEGIN; %[3]s;
			INSERT INTO public.b VALUES (%[1]d, 'fine-%[1]d', %[1]d);
			UPDATE public.b SET qty = qty + 1000 WHERE id %% 100 = %[2]d;
			COMMIT`, 10000+i, i, tc.poisonSQL(i)))
	}

	appErr := p.waitTableFailed(tableA)
	if appErr.Type() != failure.PoisonBatch {
		t.Fatalf("table a failed with %s (%v), want %s", appErr.Type(), appErr, failure.PoisonBatch)
	}
	msg := appErr.Error()
	t.Logf("table a failed: %s: %s", appErr.Type(), shortText(msg, 600))
	for _, want := range append([]string{"public.a"}, tc.wantInErr...) {
		if !strings.Contains(msg, want) {
			t.Errorf("the PoisonBatch error does not name %q: %s", want, shortText(msg, 600))
		}
	}
	status, err := p.sluiceFails("status") // a failed table: status exits non-zero
	if err == nil {
		t.Errorf("sluice status exited 0 with a failed table:\n%s", status)
	}
	if l := strings.ToLower(statusLine(status, "public.a")); !strings.Contains(l, "failed") || !strings.Contains(l, "poison") {
		t.Errorf("sluice status does not show public.a FAILED with the poison error: %q\n%s", l, status)
	}
	posA, ok := position()
	if !ok || posA.Position.LSN > before {
		t.Fatalf("%s's committed position is %s (ok %v); want one at or before the WAL end taken before the poisoned writes (%X)", targetA, posA, ok, before)
	}

	// The other table goes on and converges; a's position stays and its old rows are there.
	p.exec(`INSERT INTO public.b SELECT g, 'later-' || g, g FROM generate_series(20001, 20300) g`,
		`DELETE FROM public.b WHERE id BETWEEN 1 AND 50`)
	p.waitEqualTo("public.b", "id", twoTableColumns, readB)
	if again, _ := position(); again != posA {
		t.Fatalf("%s's position moved from %s to %s while its table was failed", targetA, posA, again)
	}
	old, err := readA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, found := old.Rows["10000"]; found || len(old.Rows) != poisonSeed {
		t.Fatalf("%s holds %d rows (poisoned key present: %v); want the %d rows from before the poison", targetA, len(old.Rows), found, poisonSeed)
	}

	tc.fix(t, ctx, p)
	resumed := time.Now().Add(-time.Second)
	t.Logf("sluice resume: %s", p.sluice("resume", "--table", tableA.String()))
	p.started = resumed
	p.waitStream(tableA)
	id := workflows.TableWorkflowID(p.name, tableA)
	if began := scheduledActivities(t, p.temporal, id)["BeginSnapshot"] > 0; began != tc.backfills {
		t.Fatalf("the resumed run of %s backfilled: %v, want %v", id, began, tc.backfills)
	}
	p.exec(`INSERT INTO public.a VALUES (30000, 'after-fix', 1)`,
		`UPDATE public.a SET qty = 4242 WHERE id = 5`,
		`DELETE FROM public.a WHERE id = 6`)
	p.waitEqualTo("public.a", "id", twoTableColumns, readA)
	p.waitEqualTo("public.b", "id", twoTableColumns, readB)
}

// clickhousePoison retypes the target's column in ClickHouse under the running pipeline.
func clickhousePoison() poisonCase {
	var conn driver.Conn
	var db string
	return poisonCase{
		name: "clickhouse",
		open: func(t *testing.T) (*icebergPipeline, sinkReader, sinkReader, string) {
			addr := testenv.ClickHouse(t)
			db = testenv.RandomName("sluice_poison_")
			p := newPipeline(t, "", fmt.Sprintf("  type: clickhouse\n  clickhouse:\n    addr: %s\n    database: %s", addr, db),
				[]string{"public.a:a", "public.b:b"}, twoTablesDDL(poisonSeed)...)
			var err error
			conn, err = clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.Native, DialTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db); _ = conn.Close() })
			read := func(name string) sinkReader { return clickhouseColumns(conn, db+"."+name, twoTableColumns) }
			return p, read("a"), read("b"), "a"
		},
		breakSink: func(t *testing.T, ctx context.Context) {
			if err := conn.Exec(ctx, "ALTER TABLE "+db+".a MODIFY COLUMN qty Nullable(String)"); err != nil {
				t.Fatalf("retyping qty in ClickHouse: %v", err)
			}
		},
		poisonSQL: func(i int) string {
			return fmt.Sprintf(`INSERT INTO public.a VALUES (%[1]d, 'poisoned-%[1]d', %[1]d);
				UPDATE public.a SET qty = qty + 1 WHERE id %% 100 = %[2]d`, 10000+i, i)
		},
		wantInErr: []string{"column qty", "is Nullable(String) in ClickHouse", "MODIFY COLUMN"},
		fix: func(t *testing.T, ctx context.Context, _ *icebergPipeline) {
			if err := conn.Exec(ctx, "ALTER TABLE "+db+".a MODIFY COLUMN qty Nullable(Int32)"); err != nil {
				t.Fatalf("retyping qty back in ClickHouse: %v", err)
			}
		},
	}
}

// couchbasePoison writes a row too large for a Couchbase document.
func couchbasePoison() poisonCase {
	var bucket *gocb.Bucket
	var scope string
	return poisonCase{
		name: "couchbase",
		open: func(t *testing.T) (*icebergPipeline, sinkReader, sinkReader, string) {
			cb := testenv.Couchbase(t)
			scope = testenv.RandomName("poison")
			p := newPipeline(t, "", couchbaseYAML(cb), []string{"public.a:" + scope + ".a", "public.b:" + scope + ".b"},
				twoTablesDDL(poisonSeed)...)
			bucket = couchbaseBucket(t, cb)
			universe := keys([2]int{1, poisonSeed}, [2]int{10000, 10002}, [2]int{20001, 20300}, [2]int{30000, 30000})
			return p, readCouchbase(bucket, scope, "a", universe, twoTableColumns), readCouchbase(bucket, scope, "b", universe, twoTableColumns), scope + ".a"
		},
		poisonSQL: func(i int) string {
			if i > 0 {
				return fmt.Sprintf(`INSERT INTO public.a VALUES (%[1]d, 'after-the-large-row-%[1]d', %[1]d)`, 10000+i)
			}
			return `INSERT INTO public.a VALUES (10000, repeat('x', 21 * 1024 * 1024), 1)`
		},
		wantInErr: []string{`document "10000"`, "20971520", "shrink the row"},
		backfills: true,
		fix: func(t *testing.T, ctx context.Context, p *icebergPipeline) {
			p.exec(`UPDATE public.a SET name = 'shrunk' WHERE id = 10000`)
			if err := bucket.CollectionsV2().DropCollection(scope, "a", &gocb.DropCollectionOptions{Context: ctx}); err != nil {
				t.Fatalf("dropping collection %s.a: %v", scope, err)
			}
		},
	}
}

// scheduledActivities counts the activities scheduled in the current run of workflow id, by type.
func scheduledActivities(t *testing.T, c client.Client, id string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := map[string]int{}
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("reading the history of %s: %v", id, err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			n[a.GetActivityType().GetName()]++
		}
	}
	return n
}

// shortText cuts s to at most n bytes for a log line.
func shortText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
