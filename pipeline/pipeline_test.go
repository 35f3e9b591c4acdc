package pipeline

import (
	"testing"

	"github.com/sluicecdc/sluice/config"
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
