package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/testkit/localrun"
)

var (
	tableA = batch.TableName{Schema: "public", Name: "a"}
	tableB = batch.TableName{Schema: "public", Name: "b"}
)

// twoTablesDDL creates public.a and public.b with the same shape and seeds n rows in each.
func twoTablesDDL(n int) []string {
	var out []string
	for _, t := range []string{"a", "b"} {
		out = append(out,
			fmt.Sprintf(`CREATE TABLE public.%s (id bigint PRIMARY KEY, name text NOT NULL, qty int)`, t),
			fmt.Sprintf(`INSERT INTO public.%s SELECT g, '%s-' || g, g %% 97 FROM generate_series(1, %d) g`, t, t, n))
	}
	return out
}

var twoTableColumns = []string{"name", "qty"}

// TestPoisonBatchStopsOneTableAndResumeConverges proves the poison-batch paragraph of the
// guarantees end to end on Iceberg, with two tables in one pipeline:
//
//   - The cause: an operator drops column qty from the Iceberg table raw.a by hand (in the
//     catalog) while public.a still has it. The sink cannot hold the next batch of public.a,
//     which carries qty: a poison batch. (A schema change in Postgres is not the cause here: one
//     the stream cannot carry stops the table as SchemaChanged, TestSchemaChangesEverySink.)
//   - The table's workflow fails with the non-retryable PoisonBatch error naming the table and
//     the column, `sluice status` shows it FAILED with the cause, its committed position stays
//     before the batch (at or below the WAL position taken before the poisoned writes), and the
//     sink still holds its old rows.
//   - public.b, written in the same transactions, keeps streaming and converges.
//   - The fix: the rows the sink holds lost their qty values with the column, so the honest fix
//     is a new copy: drop the Iceberg table (an operator does it in the catalog) and
//     `sluice resume --table public.a`. The new run creates the table again, finds no committed
//     position, backfills from a new snapshot and streams again; raw.a then equals the source key
//     by key, including writes made after the fix.
func TestPoisonBatchStopsOneTableAndResumeConverges(t *testing.T) {
	defer parallel(t)()
	p := newIcebergPipeline(t, "", []string{"public.a:raw.a", "public.b:raw.b"}, twoTablesDDL(2000)...)
	p.worker("worker")
	p.sluice("start")
	p.waitStream(tableA)
	p.waitStream(tableB)
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)

	ctx := context.Background()
	sink := p.icebergSink()
	before := p.currentLSN(ctx)
	dropIcebergColumn(ctx, t, p.icebergTable(ctx, sink, "raw.a"), "qty")
	for i := 0; i < 3; i++ {
		p.exec(fmt.Sprintf(`BEGIN;
			INSERT INTO public.a VALUES (%[1]d, 'poisoned-%[1]d', %[1]d);
			UPDATE public.a SET qty = qty + 1000 WHERE id %% 100 = %[2]d;
			INSERT INTO public.b VALUES (%[1]d, 'fine-%[1]d', %[1]d);
			UPDATE public.b SET qty = qty + 1000 WHERE id %% 100 = %[2]d;
			COMMIT`, 10000+i, i))
	}

	appErr := p.waitTableFailed(tableA)
	if appErr.Type() != failure.PoisonBatch {
		t.Fatalf("table a failed with %s (%v), want %s", appErr.Type(), appErr, failure.PoisonBatch)
	}
	t.Logf("table a failed: %s: %s", appErr.Type(), appErr.Error())
	for _, want := range []string{"public.a", "qty"} {
		if !strings.Contains(appErr.Error(), want) {
			t.Errorf("the PoisonBatch error does not name %q: %v", want, appErr)
		}
	}
	status, err := p.sluiceFails("status") // a failed table: status exits non-zero
	if err == nil {
		t.Errorf("sluice status exited 0 with a failed table:\n%s", status)
	}
	t.Logf("sluice status:\n%s", status)
	lineA := statusLine(status, "public.a")
	if l := strings.ToLower(lineA); !strings.Contains(l, "failed") || !(strings.Contains(l, "poison batch") || strings.Contains(l, "poisonbatch")) {
		t.Errorf("sluice status does not show public.a FAILED with the poison error: %q", lineA)
	}
	if lineB := statusLine(status, "public.b"); !strings.Contains(strings.ToLower(lineB), "running") {
		t.Errorf("sluice status does not show public.b RUNNING: %q", lineB)
	}

	// The position stays before the poisoned batch, and stays there.
	posA, ok := p.sinkPosition(ctx, sink, "raw.a")
	// The snapshot may have been exported at exactly the WAL end taken in `before` (nothing was
	// written since), so the position may equal it; the poisoned writes all come after it.
	if !ok || posA.Position.LSN > before {
		t.Fatalf("raw.a's committed position is %s (ok %v); want one at or before the WAL end taken before the poisoned writes (%X)", posA, ok, before)
	}

	// The other table goes on: more writes to b only, and it converges.
	p.exec(`INSERT INTO public.b SELECT g, 'later-' || g, g FROM generate_series(20001, 20500) g`,
		`DELETE FROM public.b WHERE id BETWEEN 1 AND 50`)
	p.waitEqual("public.b", "raw.b", "id", twoTableColumns)
	if again, _ := p.sinkPosition(ctx, sink, "raw.a"); again != posA {
		t.Fatalf("raw.a's position moved from %s to %s while its table was failed", posA, again)
	}
	old, err := localrun.ScanIceberg(ctx, p.cfg, "raw.a", "id", []string{"id", "name"})
	if err != nil {
		t.Fatal(err)
	}
	if _, found := old.Rows["10000"]; found || len(old.Rows) != 2000 {
		t.Fatalf("raw.a holds %d rows (poisoned key present: %v); want the 2000 rows from before the poison", len(old.Rows), found)
	}

	// The fix: the target lost qty in every row it holds; drop it and resume the table.
	if err := sink.Catalog().DropTable(ctx, table.Identifier{"raw", "a"}); err != nil {
		t.Fatalf("dropping iceberg table raw.a: %v", err)
	}
	resumed := time.Now().Add(-time.Second)
	t.Logf("sluice resume: %s", p.sluice("resume", "--table", "public.a"))
	p.started = resumed
	p.waitStream(tableA)
	p.exec(`INSERT INTO public.a VALUES (30000, 'after-fix', 30000)`,
		`UPDATE public.a SET qty = -5 WHERE id = 5`,
		`DELETE FROM public.a WHERE id = 6`)
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)
	p.waitEqual("public.b", "raw.b", "id", twoTableColumns)
}

// dropIcebergColumn drops column col from Iceberg table tbl by hand, as an operator would in
// the catalog, behind the pipeline's back.
func dropIcebergColumn(ctx context.Context, t *testing.T, tbl *table.Table, col string) {
	t.Helper()
	tx := tbl.NewTransaction()
	if err := tx.UpdateSchema(true, false).DeleteColumn([]string{col}).Commit(); err != nil {
		t.Fatalf("dropping column %s of iceberg table %v: %v", col, tbl.Identifier(), err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatalf("committing the drop of column %s of iceberg table %v: %v", col, tbl.Identifier(), err)
	}
}

// statusLine returns the line of `sluice status` output about table.
func statusLine(status, table string) string {
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, table+" ") {
			return l
		}
	}
	return ""
}
