package tests

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/testkit/localrun"
)

// TestStoredPositionFromAnotherSourceStops runs pipeline A into a target until it has
// committed, then starts pipeline B, configured by mistake with the same sink and target but
// reading another database of the same cluster (so another slot: another source). B's table
// must stop at once, before it writes anything and whether or not its source changes, with a
// non-retryable SourceMismatch error that names the table and the target, says the stored
// position belongs to another source and what to do; A's rows and committed position in the
// target are untouched. It runs on every sink, since each stores its position its own way
// (Iceberg snapshot properties, ClickHouse marker rows, Couchbase checkpoint documents).
func TestStoredPositionFromAnotherSourceStops(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			storedPositionFromAnotherSource(t, sk)
		})
	}
}

func storedPositionFromAnotherSource(t *testing.T, sk sinkKind) {
	ctx := context.Background()
	universe := keys([2]int{1, 1000}, [2]int{200001, 200500}, [2]int{700000, 700050}, [2]int{900000, 900000})
	dest := sk.dest(t)
	target := dest.target("items")
	tables := []string{"public.items:" + target}
	a := newPipeline(t, "", dest.yaml, tables, itemsDDL, itemsSeed(1, 1000))
	readA := dest.read(a, target, e2eColumns, universe)
	a.worker("worker-a")
	a.sluice("start")
	a.waitStream(itemsTable)
	a.exec(liveItemChanges...)
	a.waitEqualTo("public.items", "id", e2eColumns, readA)
	sink := openSink(t, a)
	posA, ok := sinkPositionOf(t, sink, target)
	if !ok {
		t.Fatalf("pipeline A committed but %s holds no position", target)
	}
	t.Logf("pipeline A committed %s at %s", target, posA)

	// B: the same sink section, the same target, another database.
	b := newPipeline(t, "", dest.yaml, tables,
		itemsDDL, itemsSeed(1, 500), `UPDATE public.items SET name = 'from-b-' || id`)
	b.worker("worker-b")
	b.sluice("start")

	// B's table stops before any change of B's source is written: no batch is needed to notice.
	appErr := b.waitTableFailed(itemsTable)
	t.Logf("pipeline B's table stopped: %s: %s", appErr.Type(), appErr.Message())
	if appErr.Type() != failure.SourceMismatch {
		t.Errorf("error type %s, want %s", appErr.Type(), failure.SourceMismatch)
	}
	msg := appErr.Message()
	for _, want := range []string{
		"public.items", target, // which table, which target
		"another source",                     // what is wrong
		a.cfg.Source.Slot, b.cfg.Source.Slot, // both sources, by slot
		"own target", "sluice resume --table public.items", // what to do
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q: %s", want, msg)
		}
	}
	status, serr := b.sluiceFails("status") // a failed table: status exits non-zero
	if serr == nil {
		t.Errorf("sluice status exited 0 with a failed table:\n%s", status)
	}
	if !strings.Contains(status, failure.SourceMismatch) {
		t.Errorf("sluice status of pipeline B does not show the failure:\n%s", status)
	}

	// Changes on B's source are staged by B's reader and stay there: the stopped table commits
	// none of them.
	b.exec(`UPDATE public.items SET qty = -1 WHERE id <= 100`, `DELETE FROM public.items WHERE id BETWEEN 101 AND 150`, itemsSeed(700000, 700050))
	err := localrun.WaitFor(ctx, "pipeline B's reader to stage its source's changes", 2*time.Minute, 500*time.Millisecond,
		func(context.Context) (bool, string, error) {
			n, err := countFiles(filepath.Join(b.dir, "staging"))
			return n > 0, fmt.Sprintf("%d staged files", n), err
		})
	if err != nil {
		t.Fatal(err)
	}

	// A's target is untouched: its rows are A's source's, its position A's.
	a.waitEqualTo("public.items", "id", e2eColumns, readA)
	posAfter, ok := sinkPositionOf(t, sink, target)
	if !ok || posAfter != posA {
		t.Fatalf("%s position moved from %s to %s (has position %v)", target, posA, posAfter, ok)
	}
	got, err := readA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range got.Rows {
		if strings.HasPrefix(r[0], "from-b-") {
			t.Fatalf("row %s of %s came from pipeline B: %v", k, target, r)
		}
	}
}

// countFiles counts the staged batch files (*.arrow) under dir (none when it does not exist).
func countFiles(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".arrow") {
			n++
		}
		return nil
	})
	return n, err
}
