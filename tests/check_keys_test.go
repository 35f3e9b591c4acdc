package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestCheckRefusesKeysThatMergeRows: `sluice check` refuses a key under which distinct source
// rows would become one target row, naming the table, the columns and the fix, on a ClickHouse
// pipeline (the shared server, 18.16, gets the compatible layout):
//
//   - public.events is keyed by tables[].key [id, Kind, "Day"] (SQL syntax: Kind folds to kind),
//     and no primary key or unique index lies within those columns: refused with CREATE UNIQUE
//     INDEX as the fix. Once a unique index on (kind, "Day") exists, check accepts the key, and
//     the table streams into the sink, equal to the source key by key over every column.
//   - public.ticks has a timestamptz primary key: the compatible layout's DateTime keeps whole
//     seconds, so two ticks within one second would be one row. Refused at check, naming the
//     modern layout; the worker refuses it too when it sets up the target (PoisonBatch), while
//     the other table goes on.
func TestCheckRefusesKeysThatMergeRows(t *testing.T) {
	defer parallel(t)()
	addr := testenv.ClickHouse(t)
	db := testenv.RandomName("sluice_keys_")
	p := newPipeline(t, "", fmt.Sprintf("  type: clickhouse\n  clickhouse:\n    addr: %s\n    database: %s", addr, db),
		[]string{"public.events:events", "public.ticks:ticks"},
		`CREATE TABLE public.events (id bigint NOT NULL, kind text NOT NULL, "Day" int NOT NULL, note text)`,
		`ALTER TABLE public.events REPLICA IDENTITY FULL`,
		`INSERT INTO public.events SELECT g, 'k' || (g % 7), g, 'n' || g FROM generate_series(1, 300) g`,
		`CREATE TABLE public.ticks (at timestamptz PRIMARY KEY, v int)`,
		`INSERT INTO public.ticks VALUES ('2026-01-01 00:00:00.25+00', 1), ('2026-01-01 00:00:00.75+00', 2)`)
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.Native, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db); _ = conn.Close() })
	setTableKey(t, p, "public.events", `[id, Kind, '"Day"']`)

	out, err := p.sluiceFails("check")
	t.Logf("sluice check:\n%s", out)
	if err == nil {
		t.Fatalf("sluice check accepted keys that merge rows:\n%s", out)
	}
	for _, want := range []string{
		`table public.events: the configured key (id, kind, Day) is not proven unique`,
		"distinct source rows sharing a key would collapse into one target row",
		`CREATE UNIQUE INDEX ON "public"."events" ("id", "kind", "Day")`,
		`table public.ticks: key column "at" (timestamp with time zone) cannot be a key of the ClickHouse compatible layout`,
		"two keys within one second would become one row",
		"sink.clickhouse.schema: modern",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sluice check does not say %q", want)
		}
	}

	// The fix the check names makes the key unique: accepted, and followed exactly.
	p.exec(`CREATE UNIQUE INDEX events_kind_day ON public.events (kind, "Day")`)
	out, _ = p.sluiceFails("check")
	if strings.Contains(out, "public.events") || !strings.Contains(out, "public.ticks") {
		t.Errorf("sluice check after CREATE UNIQUE INDEX: want only public.ticks refused:\n%s", out)
	}
	p.worker("worker")
	p.sluice("start")
	ticks := batch.TableName{Schema: "public", Name: "ticks"}
	appErr := p.waitTableFailed(ticks)
	if appErr.Type() != failure.PoisonBatch || !strings.Contains(appErr.Error(), `key column "at"`) || !strings.Contains(appErr.Error(), "sink.clickhouse.schema: modern") {
		t.Errorf("public.ticks failed with %s: %v; want %s naming the key column and the modern layout", appErr.Type(), appErr, failure.PoisonBatch)
	}
	p.exec(`UPDATE public.events SET note = 'changed' WHERE id <= 10`, `DELETE FROM public.events WHERE id = 11`,
		`INSERT INTO public.events VALUES (301, 'k0', 301, 'live')`)
	cols := []string{"kind", "Day", "note"}
	p.waitEqualTo("public.events", "id", cols, clickhouseColumns(conn, db+".events", cols))
}

// setTableKey sets tables[].key of the table whose source is src to keyYAML (a YAML list) in the
// pipeline's config file.
func setTableKey(t *testing.T, p *icebergPipeline, src, keyYAML string) {
	t.Helper()
	data, err := os.ReadFile(p.config)
	if err != nil {
		t.Fatal(err)
	}
	entry := "  - source: " + src + "\n"
	if !strings.Contains(string(data), entry) {
		t.Fatalf("the config has no table %s", src)
	}
	text := strings.Replace(string(data), entry, entry+"    key: "+keyYAML+"\n", 1)
	if err := os.WriteFile(p.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if p.cfg, err = config.Load(p.config); err != nil {
		t.Fatalf("config with tables[].key %s: %v", keyYAML, err)
	}
}
