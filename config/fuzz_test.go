package config

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// FuzzParse feeds arbitrary documents to the YAML and JSON paths. Neither may panic, and a config
// that passes must survive the JSON round trip the workflows put it through unchanged.
func FuzzParse(f *testing.F) {
	for _, file := range examples(f) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	base, _ := json.Marshal(baseInput())
	f.Add(base)
	for _, s := range []string{
		"",
		"pipeline: [",
		"tables: [null, {source: a, key: []}]",
		"sink: iceberg",
		"sink: {type: clickhouse, clickhouse: {addr: 1}}",
		"batch: {max_bytes: 1.5e300, max_wait: 9999999999h}",
		"? [a]\n: b",
		"source: {dsn: &a x, slot: *a}",
		`{"tables": [{"metadata": [{"from": {"x": 1}}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if c, err := parse(bytes.NewReader(data), "yaml", noEnv); err == nil {
			checkRoundTrip(t, c)
		}
		if c, err := FromJSON(data); err == nil {
			checkRoundTrip(t, c)
		}
	})
}

// checkRoundTrip encodes c as JSON and decodes it again.
func checkRoundTrip(t *testing.T, c *Config) {
	t.Helper()
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("encoding a valid config: %v", err)
	}
	back, err := FromJSON(js)
	if err != nil {
		t.Fatalf("a valid config does not decode from its own JSON: %v\n%s", err, js)
	}
	if !reflect.DeepEqual(c, back) {
		t.Fatalf("JSON round trip changed the config:\n%s\n%s", js, mustJSON(t, back))
	}
	_ = c.Redacted().String()
}
