package couchbase

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestConfigValidate reports every problem at once with its key path.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := Config{ConnStr: "couchbase://h", Username: "u", Password: "p", Bucket: "b"}
	if err := good.Validate(); err != nil {
		t.Fatalf("a minimal config: %v", err)
	}
	cases := []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"connstr", func(c *Config) { c.ConnStr = "http://h" }, []string{"sink.couchbase.connstr"}},
		{"credentials", func(c *Config) { c.Username, c.Password = "", "" }, []string{"sink.couchbase.username", "sink.couchbase.password"}},
		{"bucket", func(c *Config) { c.Bucket = "my bucket" }, []string{"sink.couchbase.bucket"}},
		{"scope", func(c *Config) { c.Scope = "_system" }, []string{"sink.couchbase.scope", "only _default"}},
		{"metadata collection", func(c *Config) { c.MetadataCollection = "a.b" }, []string{"sink.couchbase.metadata_collection"}},
		{"durability", func(c *Config) { c.Durability = "all" }, []string{"sink.couchbase.durability", "persist_to_majority"}},
		{"concurrency", func(c *Config) { c.Concurrency = -1 }, []string{"sink.couchbase.concurrency"}},
		{"all at once", func(c *Config) { c.ConnStr, c.Durability, c.Concurrency = "", "x", 5000 },
			[]string{"sink.couchbase.connstr", "sink.couchbase.durability", "sink.couchbase.concurrency"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := good
			tc.edit(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestCheckpointGolden pins the stored checkpoint format: a change needs a new version.
func TestCheckpointGolden(t *testing.T) {
	t.Parallel()
	pos := batch.SourcePosition{Source: batch.SourceID{SystemID: "7300000000000000001", Timeline: 1, Slot: "sluice_shop"},
		Position: batch.Position{LSN: 0x16B3748, Seq: 12}}
	cp := checkpoint{Version: checkpointVersion, Table: "shop.orders", Target: "shop.orders", Position: &pos,
		PositionText: pos.String(), Phase: "snapshot", IndexChunks: 3, UpdatedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	got, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "checkpoint.golden.json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run with -update to create it): %v", path, err)
	}
	if string(got)+"\n" != string(want) {
		t.Errorf("checkpoint format changed; bump checkpointVersion and migrate, or run -update if intended\n got %s\nwant %s", got, want)
	}
	var back checkpoint
	if err := json.Unmarshal(want, &back); err != nil || back.Position == nil || *back.Position != pos {
		t.Errorf("golden file does not read back: %+v, %v", back, err)
	}
}
