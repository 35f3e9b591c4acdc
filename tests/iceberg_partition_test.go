package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestIcebergPartitionedPipeline runs a pipeline whose target is partitioned by
// [day(created_at), bucket(16, id)] (tables[].iceberg.partition_by, as a YAML flow list): a
// backfill over five days, then updates that move rows to another day, deletes, primary-key
// changes and inserts while it streams. The target equals the source key by key when read by
// iceberg-go and by ClickHouse (chdb).
func TestIcebergPartitionedPipeline(t *testing.T) {
	defer parallel(t)()
	ch := testenv.NewChDB(t)
	p := newPipelineWith(t, pipelineOptions{
		Tables: []string{"public.events:raw.events"},
		SetupSQL: []string{
			`CREATE TABLE public.events (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, name text)`,
			`INSERT INTO public.events SELECT g, timestamptz '2026-11-01 08:00+00' + (g % 5) * interval '1 day' + g * interval '1 second', 'e' || g
			 FROM generate_series(1, 2000) g`,
		},
		TableYAML: "    iceberg:\n      partition_by: [day(created_at), bucket(16, id)]\n      sort_by: [created_at]\n",
	})
	events := batch.TableName{Schema: "public", Name: "events"}
	p.worker("worker")
	p.sluice("start")
	p.waitStream(events)
	p.exec(
		`UPDATE public.events SET created_at = created_at + interval '2 days', name = 'moved' WHERE id % 7 = 0`,
		`DELETE FROM public.events WHERE id % 11 = 0`,
		`UPDATE public.events SET id = id + 100000, created_at = created_at - interval '1 day' WHERE id BETWEEN 100 AND 150`,
		`INSERT INTO public.events SELECT g, timestamptz '2026-11-09 08:00+00', 'new' FROM generate_series(3001, 3100) g`,
		`UPDATE public.events SET created_at = created_at + interval '3 days' WHERE id % 7 = 0 AND id < 700`,
	)
	p.waitEqual("public.events", "raw.events", "id", []string{"created_at", "name"})

	loc, err := localrun.IcebergLocation(t.Context(), p.cfg, "raw.events")
	if err != nil {
		t.Fatal(err)
	}
	err = localrun.WaitFor(context.Background(), "ClickHouse to read raw.events equal to the source", time.Minute, time.Second,
		func(ctx context.Context) (bool, string, error) {
			want, err := eventsBySource(ctx, p.dsn)
			if err != nil {
				return false, "", err
			}
			rows, err := ch.IcebergLocal(ctx, loc, "id, toUnixTimestamp64Micro(created_at) AS at, name")
			if err != nil {
				return false, "", err
			}
			got := map[string]string{}
			var diff []string
			for _, r := range rows {
				k := fmt.Sprint(r["id"])
				if _, dup := got[k]; dup {
					diff = append(diff, "key "+k+" twice")
				}
				got[k] = fmt.Sprintf("%v %v", r["at"], r["name"])
			}
			for k, w := range want {
				if got[k] != w {
					diff = append(diff, fmt.Sprintf("key %s = %q, want %q", k, got[k], w))
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					diff = append(diff, "key "+k+" should not be visible")
				}
			}
			if len(diff) > 5 {
				diff = diff[:5]
			}
			return len(diff) == 0, strings.Join(diff, "; "), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// eventsBySource reads public.events as "microseconds name" by id.
func eventsBySource(ctx context.Context, dsn string) (map[string]string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT id, (extract(epoch FROM created_at) * 1000000)::bigint, name FROM public.events`)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for rows.Next() {
		var id, at int64
		var name string
		if err := rows.Scan(&id, &at, &name); err != nil {
			return nil, err
		}
		out[fmt.Sprint(id)] = fmt.Sprintf("%d %s", at, name)
	}
	return out, rows.Err()
}
