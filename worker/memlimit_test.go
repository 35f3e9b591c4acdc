package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"400MiB", 400 << 20, true},
		{"2GiB", 2 << 30, true},
		{"1048576", 1 << 20, true},
		{"512 KiB", 512 << 10, true},
		{"100B", 100, true},
		{"1.5GiB", 3 << 29, true}, // the config's size syntax
		{"-1MiB", 0, false},
		{"0MiB", 0, false},
		{"lots", 0, false},
		{"1.3B", 0, false},
	} {
		got, err := parseMemoryLimit(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseMemoryLimit(%q) = %d, %v; want %d (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestCgroupLimit(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          int64
		ok            bool
	}{
		{"limited", "536870912\n", 536870912, true},
		{"unlimited", "max\n", 0, false},
		{"missing", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if tc.content != "" {
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, ok := cgroupLimit(path)
			if got != tc.want || ok != tc.ok {
				t.Errorf("cgroupLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestAutoLimitFromBatches(t *testing.T) {
	for _, tc := range []struct {
		maxBytes, want int64
	}{
		{64 << 20, 448 << 20}, // the default batch.max_bytes
		{512 << 20, 3584 << 20},
		{8 << 20, 256 << 20}, // small batches: the floor
	} {
		if got := autoLimitFromBatches(tc.maxBytes); got != tc.want {
			t.Errorf("autoLimitFromBatches(%d) = %d, want %d", tc.maxBytes, got, tc.want)
		}
	}
}
