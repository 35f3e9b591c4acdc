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
		{64 << 20, 320 << 20}, // the default batch.max_bytes: five batches
		{512 << 20, 2560 << 20},
		{51 << 20, 256 << 20}, // five batches would be 255 MiB: the floor
		{8 << 20, 256 << 20},  // small batches: the floor
	} {
		if got := autoLimitFromBatches(tc.maxBytes); got != tc.want {
			t.Errorf("autoLimitFromBatches(%d) = %d, want %d", tc.maxBytes, got, tc.want)
		}
	}
}

func TestDeriveMemoryLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	limited := filepath.Join(dir, "limited")
	if err := os.WriteFile(limited, []byte("1073741824\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unlimited := filepath.Join(dir, "unlimited")
	if err := os.WriteFile(unlimited, []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name, flag, gomemlimit, cgroup string
		maxBytes                       int64
		want                           memoryLimit
		fails                          bool
	}{
		{name: "auto outside a container", flag: "auto", cgroup: missing, maxBytes: 64 << 20,
			want: memoryLimit{bytes: 320 << 20, source: "batch.max_bytes"}},
		{name: "auto, cgroup without a limit", flag: "auto", cgroup: unlimited, maxBytes: 64 << 20,
			want: memoryLimit{bytes: 320 << 20, source: "batch.max_bytes"}},
		{name: "empty is auto", flag: "", cgroup: missing, maxBytes: 128 << 20,
			want: memoryLimit{bytes: 640 << 20, source: "batch.max_bytes"}},
		{name: "auto, small batches take the floor", flag: "AUTO", cgroup: missing, maxBytes: 1 << 20,
			want: memoryLimit{bytes: 256 << 20, source: "batch.max_bytes"}},
		{name: "auto in a container: 75% of its limit", flag: "auto", cgroup: limited, maxBytes: 64 << 20,
			want: memoryLimit{bytes: 768 << 20, source: "container"}},
		{name: "GOMEMLIMIT wins over the container", flag: "auto", gomemlimit: "300MiB", cgroup: limited, maxBytes: 64 << 20,
			want: memoryLimit{source: "GOMEMLIMIT"}},
		{name: "off", flag: "off", cgroup: limited, maxBytes: 64 << 20, want: memoryLimit{source: "off"}},
		{name: "zero is off", flag: "0", cgroup: missing, maxBytes: 64 << 20, want: memoryLimit{source: "off"}},
		{name: "a size wins over everything", flag: "400MiB", gomemlimit: "300MiB", cgroup: limited, maxBytes: 64 << 20,
			want: memoryLimit{bytes: 400 << 20, source: "flag"}},
		{name: "a bad size", flag: "lots", cgroup: missing, maxBytes: 64 << 20, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := deriveMemoryLimit(tc.flag, tc.gomemlimit, tc.cgroup, tc.maxBytes)
			if (err != nil) != tc.fails {
				t.Fatalf("deriveMemoryLimit(%q) error %v, want failure %v", tc.flag, err, tc.fails)
			}
			if got != tc.want {
				t.Errorf("deriveMemoryLimit(%q, GOMEMLIMIT %q) = %+v, want %+v", tc.flag, tc.gomemlimit, got, tc.want)
			}
		})
	}
}
