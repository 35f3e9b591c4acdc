package tests

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/localrun"
)

// multiTableTxn is one source transaction touching public.a and public.b: an insert, an update
// and a delete in each.
func multiTableTxn(i int) string {
	return fmt.Sprintf(`BEGIN;
		INSERT INTO public.a VALUES (%[1]d, 'txn-a-%[1]d', %[2]d);
		INSERT INTO public.b VALUES (%[1]d, 'txn-b-%[1]d', %[2]d);
		UPDATE public.a SET qty = coalesce(qty, 0) + 1 WHERE id %% 50 = %[3]d;
		UPDATE public.b SET qty = coalesce(qty, 0) + 1 WHERE id %% 50 = %[3]d;
		DELETE FROM public.a WHERE id = %[4]d;
		DELETE FROM public.b WHERE id = %[4]d;
		COMMIT`, 100000+i, i, i%50, 1+i)
}

// TestCrashBetweenTwoTablesCommitsOfOneTransaction proves per-table atomicity under crashes,
// on every sink (each commits a table's rows and position its own way):
//
//  1. Deterministically: with public.b paused, one transaction touching both tables is
//     committed to a's target only, then the worker is SIGKILLed. The sink then holds one table
//     advanced past the transaction and one not (the state a crash between the two tables'
//     commits leaves). A new worker and `resume` of public.b replay the unadvanced table from
//     its committed position, and both tables equal the source.
//  2. Under load: transactions touching both tables stream while a worker is SIGKILLed three
//     times at arbitrary points of the commits; both tables converge key by key with no key
//     visible twice.
//
// The killed worker is never the one running the reader (ReadStream): this test is about the
// commit side, and a killed reader only adds its one-minute heartbeat timeout.
func TestCrashBetweenTwoTablesCommitsOfOneTransaction(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			crashBetweenTwoTables(t, sk)
		})
	}
}

// crashTxns is the number of transactions part 2 writes (multiTableTxn 1..crashTxns).
const crashTxns = 60

func crashBetweenTwoTables(t *testing.T, sk sinkKind) {
	ctx := context.Background()
	// Small tables: gocaves writes some 5,000 documents a second.
	universe := keys([2]int{1, 1000}, [2]int{100000, 100000 + crashTxns})
	dest := sk.dest(t)
	ta, tb := dest.target("a"), dest.target("b")
	p := newPipeline(t, "", dest.yaml, []string{"public.a:" + ta, "public.b:" + tb}, twoTablesDDL(1000)...)
	readA, readB := dest.read(p, ta, twoTableColumns, universe), dest.read(p, tb, twoTableColumns, universe)
	w1, w2 := p.worker("worker-1"), p.worker("worker-2")
	p.sluice("start")
	p.waitStream(tableA)
	p.waitStream(tableB)
	sink := openSink(t, p)

	// 1. One table advanced, one not, then a crash.
	p.sluice("pause", "--table", "public.b")
	err := localrun.WaitFor(ctx, "public.b to be paused", 2*time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := localrun.TableStatus(ctx, p.temporal, p.name, tableB, p.started)
			return err == nil && st.Paused, fmt.Sprintf("%+v", st), err
		})
	if err != nil {
		t.Fatal(err)
	}
	before := p.currentLSN(ctx)
	p.exec(multiTableTxn(0))
	err = localrun.WaitFor(ctx, ta+" to commit the transaction", 2*time.Minute, 200*time.Millisecond,
		func(context.Context) (bool, string, error) {
			pos, ok := sinkPositionOf(t, sink, ta)
			return ok && pos.Position.LSN > before, ta + " at " + pos.String(), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	// Kill a worker that does not run the reader: the crash hits the commit side; killing the
	// reader's worker would stall the stream for its one-minute heartbeat timeout.
	killed := p.notReader(w1, w2)
	if err := killed.Kill(); err != nil {
		t.Fatal(err)
	}
	posA, _ := sinkPositionOf(t, sink, ta)
	posB, _ := sinkPositionOf(t, sink, tb)
	t.Logf("after the crash: %s at %s, %s at %s (the transaction commits after %X)", ta, posA, tb, posB, before)
	if posB.Position.LSN > before {
		t.Fatalf("%s advanced to %s past the transaction while its table was paused", tb, posB)
	}
	b, err := readB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Rows["100000"]; ok {
		t.Fatalf("%s holds the transaction's insert though its table never committed it", tb)
	}
	live := []*localrun.Worker{p.worker("worker-restarted"), w1, w2}
	live = slices.DeleteFunc(live, func(w *localrun.Worker) bool { return w == killed })
	p.sluice("resume", "--table", "public.b")
	p.waitEqualTo("public.a", "id", twoTableColumns, readA)
	p.waitEqualTo("public.b", "id", twoTableColumns, readB)

	// 2. Repeated kills while transactions touching both tables stream.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	var written writeCount
	go func() {
		defer written.finish()
		var err error
		for i := 1; i <= crashTxns && err == nil && wctx.Err() == nil; i++ {
			if err = execSQL(wctx, p.dsn, multiTableTxn(i)); err == nil {
				written.add()
			}
			pace(wctx, 50*time.Millisecond)
		}
		done <- err
	}()
	split := 0
	for i := 0; i < 3; i++ {
		written.waitFor(t, int64(i+1)*crashTxns/4, "a kill while transactions touching both tables stream")
		victim := p.notReader(live...)
		if err := victim.Kill(); err != nil {
			t.Fatal(err)
		}
		a, _ := sinkPositionOf(t, sink, ta)
		b, _ := sinkPositionOf(t, sink, tb)
		if a.Position.LSN != b.Position.LSN {
			split++
		}
		t.Logf("killed worker %d: %s at %s, %s at %s", victim.PID(), ta, a, tb, b)
		live = slices.DeleteFunc(live, func(w *localrun.Worker) bool { return w == victim })
		live = append(live, p.worker(fmt.Sprintf("worker-restart-%d", i)))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of 3 kills found the two tables at different positions", split)
	p.waitEqualTo("public.a", "id", twoTableColumns, readA)
	p.waitEqualTo("public.b", "id", twoTableColumns, readB)
}
