package pipeline

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
)

func TestTableOptionsMaintenance(t *testing.T) {
	t.Parallel()
	iceberg := func(every int) config.Sink {
		return config.Sink{Type: config.SinkIceberg, Iceberg: &config.Iceberg{
			Maintenance: config.IcebergMaintenance{CompactEveryCommits: every}}}
	}
	tests := []struct {
		name string
		sink config.Sink
		want int
	}{
		{name: "iceberg every 50 commits", sink: iceberg(50), want: 50},
		{name: "iceberg with the key left out takes the default", sink: iceberg(0), want: config.DefaultCompactEveryCommits},
		{name: "iceberg with -1 never maintains", sink: iceberg(-1), want: 0},
		{name: "clickhouse has no scheduled maintenance", sink: config.Sink{Type: config.SinkClickHouse, ClickHouse: &config.ClickHouse{}}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := TableOptions(&config.Config{Sink: tt.sink})
			if got.MaintainEveryCommits != tt.want {
				t.Errorf("MaintainEveryCommits = %d, want %d", got.MaintainEveryCommits, tt.want)
			}
		})
	}
}

// TestTableConfigJSON pins the JSON of a table's workflow input as pipeline.TableConfig builds it
// from a config: recorded histories and running workflows hold it.
func TestTableConfigJSON(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Pipeline: "p1", Sink: config.Sink{Type: config.SinkClickHouse}}
	tests := []struct {
		name  string
		table config.Table
		want  string
	}{
		{"plain", config.Table{Source: "shop.orders", Target: "orders"},
			`{"pipeline":"p1","spec":{"target":"orders","schema":{"table":{"schema":"shop","name":"orders"},"columns":null},"metadata":null},"sink":{"name":"clickhouse"}}`},
		{"metadata and key", config.Table{Source: `shop."Order Items"`, Target: "raw.items", Key: []string{"id"},
			Metadata: []sinks.MetadataColumn{{From: "commit_ts", As: "committed_at"}}},
			`{"pipeline":"p1","spec":{"target":"raw.items","schema":{"table":{"schema":"shop","name":"Order Items"},"columns":null},"metadata":[{"from":"commit_ts","as":"committed_at"}]},"sink":{"name":"clickhouse"},"key":["id"]}`},
		// tables[].key is SQL syntax: the input names the columns as Postgres stores them.
		{"key in SQL syntax", config.Table{Source: "shop.orders", Target: "orders", Key: []string{"Region", `"Order ID"`}},
			`{"pipeline":"p1","spec":{"target":"orders","schema":{"table":{"schema":"shop","name":"orders"},"columns":null},"metadata":null},"sink":{"name":"clickhouse"},"key":["region","Order ID"]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(TableConfig(cfg, tc.table))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("TableConfig JSON:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestSourceTablesFoldKeys: tables[].key is SQL syntax, and the source compares key columns with
// the names Postgres stores: unquoted names fold to lower case, quoted ones keep their case.
func TestSourceTablesFoldKeys(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Tables: []config.Table{
		{Source: "shop.orders", Target: "orders", Key: []string{"Region", `"Order ID"`}},
		{Source: "shop.lines", Target: "lines"},
	}}
	got := SourceTables(cfg)
	if want := []string{"region", "Order ID"}; !slices.Equal(got[0].Key, want) {
		t.Errorf("key of shop.orders = %q, want %q", got[0].Key, want)
	}
	if got[1].Key != nil {
		t.Errorf("key of shop.lines (primary key) = %q, want nil", got[1].Key)
	}
}
