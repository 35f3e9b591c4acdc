package tests

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/internal/localrun"
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

// TestCrashBetweenTwoTablesCommitsOfOneTransaction proves per-table atomicity under crashes:
//
//  1. Deterministically: with public.b paused, one transaction touching both tables is
//     committed to raw.a only, then the worker is SIGKILLed. The sinks then hold one table
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
	t.Parallel()
	ctx := context.Background()
	p := newIcebergPipeline(t, "", []string{"public.a:raw.a", "public.b:raw.b"}, twoTablesDDL(1000)...)
	w1, w2 := p.worker("worker-1"), p.worker("worker-2")
	p.sluice("start")
	p.waitStream(tableA)
	p.waitStream(tableB)
	sink := p.icebergSink()

	// 1. One table advanced, one not, then a crash.
	p.sluice("pause", "--table", "public.b")
	time.Sleep(time.Second) // the pause signal reaches the workflow
	before := p.currentLSN(ctx)
	p.exec(multiTableTxn(0))
	err := localrun.WaitFor(ctx, "raw.a to commit the transaction", time.Minute, 200*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			pos, ok := p.sinkPosition(ctx, sink, "raw.a")
			return ok && pos.Position.LSN > before, "raw.a at " + pos.String(), nil
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
	posA, _ := p.sinkPosition(ctx, sink, "raw.a")
	posB, _ := p.sinkPosition(ctx, sink, "raw.b")
	t.Logf("after the crash: raw.a at %s, raw.b at %s (the transaction commits after %X)", posA, posB, before)
	if posB.Position.LSN > before {
		t.Fatalf("raw.b advanced to %s past the transaction while its table was paused", posB)
	}
	b, err := localrun.ScanIceberg(ctx, p.cfg, "raw.b", "id", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Rows["100000"]; ok {
		t.Fatal("raw.b holds the transaction's insert though its table never committed it")
	}
	live := []*localrun.Worker{p.worker("worker-restarted"), w1, w2}
	live = slices.DeleteFunc(live, func(w *localrun.Worker) bool { return w == killed })
	p.sluice("resume", "--table", "public.b")
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)
	p.waitEqual("public.b", "raw.b", "id", twoTableColumns)

	// 2. Repeated kills while transactions touching both tables stream.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var err error
		for i := 1; i <= 60 && err == nil && wctx.Err() == nil; i++ {
			err = execSQL(wctx, p.dsn, multiTableTxn(i))
			time.Sleep(50 * time.Millisecond)
		}
		done <- err
	}()
	split := 0
	for i := 0; i < 3; i++ {
		time.Sleep(1200 * time.Millisecond)
		victim := p.notReader(live...)
		if err := victim.Kill(); err != nil {
			t.Fatal(err)
		}
		a, _ := p.sinkPosition(ctx, sink, "raw.a")
		b, _ := p.sinkPosition(ctx, sink, "raw.b")
		if a.Position.LSN != b.Position.LSN {
			split++
		}
		t.Logf("killed worker %d: raw.a at %s, raw.b at %s", victim.PID(), a, b)
		live = slices.DeleteFunc(live, func(w *localrun.Worker) bool { return w == victim })
		live = append(live, p.worker(fmt.Sprintf("worker-restart-%d", i)))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of 3 kills found the two tables at different positions", split)
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)
	p.waitEqual("public.b", "raw.b", "id", twoTableColumns)
}
