package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/failure"
)

// TestTableIdentityEverySink: changes to a table's identity that the WAL of its changes does not
// show, on every sink, one streaming pipeline of public.items per sink, the cases one after the
// other; each stops the table by name with the change and the remedy, `sluice resume` is
// refused, and the remedy (`sluice resync --table public.items`) leaves the sink equal to the
// source key by key, every column:
//
//   - DROP TABLE and CREATE TABLE under the same name, with rows: TableRecreated naming both
//     relation OIDs (the reader adds the new table back to the publication).
//   - ALTER PUBLICATION ... DROP TABLE, then inserts, updates and deletes: PublicationChanged
//     naming the publication the table left (the reader adds it back).
//   - The publication's publish flags set without delete, a DELETE, the flags set back:
//     PublicationChanged.
//   - The same while no worker runs: seen at the reader's start.
func TestTableIdentityEverySink(t *testing.T) {
	defer parallel(t)()
	for _, sk := range everySink() {
		t.Run(sk.name, func(t *testing.T) {
			defer parallel(t)()
			d := sk.dest(t)
			s := itemsTarget(t, pipelineOptions{SetupSQL: []string{itemsDDL, itemsSeed(1, 300)}}, d)
			s.know([2]int{1, 300}, [2]int{1001, 1040})
			pub := s.p.cfg.Source.Publication
			equal := func(why string) {
				t.Helper()
				t.Logf("%s: waiting for the sink to equal the source over %v", why, d.items)
				s.p.waitEqualTo("public.items", "id", d.items, d.read(s.p, d.target("items"), d.items, s.universe()))
			}
			resync := func() {
				t.Helper()
				if out, err := s.p.sluiceFails("resume", "--table", "public.items"); err == nil || !strings.Contains(err.Error()+out, "sluice resync --table public.items") {
					t.Fatalf("sluice resume after the stop: err %v, output %q; want a refusal naming sluice resync", err, out)
				}
				s.p.started = time.Now().Add(-time.Second)
				s.p.sluice("resync", "--table", "public.items")
			}
			w := s.p.worker("worker")
			s.p.sluice("start")
			s.p.waitStream(itemsTable)
			s.p.exec(`UPDATE public.items SET qty = coalesce(qty, 0) + 1 WHERE id <= 5`)
			equal("streaming")

			// DROP TABLE + CREATE TABLE of the same name (one migration), with rows.
			was := s.p.relationOID()
			s.p.exec(`BEGIN; DROP TABLE public.items; ` + itemsDDL + `; ` + itemsSeed(1, 120) + `; UPDATE public.items SET name = 'new-' || id WHERE id <= 10; COMMIT`)
			checkIdentityStop(t, s, failure.TableRecreated, fmt.Sprintf("relation OID %d → %d", was, s.p.relationOID()))
			resync()
			s.p.exec(itemsSeed(1001, 1010), `DELETE FROM public.items WHERE id = 3`)
			equal("after the re-creation and sluice resync")

			// ALTER PUBLICATION ... DROP TABLE by hand, changes meanwhile.
			s.p.exec(`ALTER PUBLICATION `+pub+` DROP TABLE public.items`,
				`UPDATE public.items SET qty = -1 WHERE id BETWEEN 20 AND 30`,
				`DELETE FROM public.items WHERE id BETWEEN 31 AND 40`,
				itemsSeed(1011, 1020))
			checkIdentityStop(t, s, failure.PublicationChanged, "left publication "+pub)
			resync()
			s.p.exec(`UPDATE public.items SET qty = -2 WHERE id = 50`)
			equal("after leaving the publication and sluice resync")

			// The publish flags without delete, a DELETE, the flags back (one transaction, so no
			// check falls in between).
			s.p.exec(`BEGIN; ALTER PUBLICATION ` + pub + ` SET (publish = 'insert, update'); DELETE FROM public.items WHERE id BETWEEN 60 AND 69; ` +
				`ALTER PUBLICATION ` + pub + ` SET (publish = 'insert, update, delete, truncate'); COMMIT`)
			checkIdentityStop(t, s, failure.PublicationChanged, "publication "+pub)
			resync()
			s.p.exec(itemsSeed(1021, 1030))
			equal("after the publish flags were off and sluice resync")

			// The same while no worker runs: seen when the reader starts.
			if err := w.Stop(); err != nil {
				t.Fatal(err)
			}
			s.p.exec(`ALTER PUBLICATION `+pub+` SET (publish = 'insert, update')`,
				`DELETE FROM public.items WHERE id BETWEEN 70 AND 79`,
				`ALTER PUBLICATION `+pub+` SET (publish = 'insert, update, delete, truncate')`)
			s.p.worker("worker-2")
			checkIdentityStop(t, s, failure.PublicationChanged, "publication "+pub+" was altered", "at the reader's start")
			resync()
			s.p.exec(itemsSeed(1031, 1040))
			equal("after the publish flags were off while stopped and sluice resync")
		})
	}
}

// checkIdentityStop waits for public.items to stop with errType and checks that the error names
// the table, the change (says) and the remedy, and that `sluice status` shows the stop.
func checkIdentityStop(t *testing.T, s *sinkTarget, errType string, says ...string) {
	t.Helper()
	appErr := s.p.waitTableFailed(itemsTable)
	if appErr.Type() != errType {
		t.Fatalf("the table failed with %s (%v), want %s", appErr.Type(), appErr, errType)
	}
	t.Logf("the table stopped: %v", appErr)
	status, err := s.p.sluiceFails("status") // a failed table: status exits non-zero
	if line := strings.ToLower(statusLine(status, "public.items")); err == nil || !strings.Contains(line, "failed") || !strings.Contains(line, strings.ToLower(errType)) {
		t.Errorf("sluice status (err %v) does not show public.items failed with %s: %q\n%s", err, errType, line, status)
	}
	for _, want := range append([]string{"table public.items", "sluice resync --table public.items"}, says...) {
		if !strings.Contains(appErr.Error(), want) {
			t.Errorf("the stop does not say %q: %v", want, appErr)
		}
	}
}

// relationOID is public.items' relation OID now.
func (p *icebergPipeline) relationOID() uint32 {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var oid uint32
	if err := p.queryRow(ctx, `SELECT 'public.items'::regclass::oid`, &oid); err != nil {
		p.t.Fatal(err)
	}
	return oid
}
