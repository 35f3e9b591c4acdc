package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	ldflags := Info{Version: "v1.2.0-3-gabc1234-dirty", Commit: "abc1234", Go: "go1.26.0"}
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		ok       bool
		fallback Info
		want     string
	}{
		{
			name: "build info with vcs",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20260101120000-4a2f97a1b2c3"}, Settings: vcs("4a2f97a1b2c3d4", "false")},
			ok:   true, fallback: ldflags,
			want: "v0.0.0-20260101120000-4a2f97a1b2c3 (commit 4a2f97a1b2c3d4, go1.26.0)",
		},
		{
			name: "modified tree",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs("4a2f97a1b2c3d4", "true")},
			ok:   true, fallback: Info{Go: "go1.26.0"},
			want: "(devel) (commit 4a2f97a1b2c3d4, modified, go1.26.0)",
		},
		{
			name: "no vcs: the ldflags values",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			ok:   true, fallback: ldflags,
			want: "v1.2.0-3-gabc1234-dirty (commit abc1234, go1.26.0)",
		},
		{
			name:     "no build info, no ldflags",
			fallback: Info{Go: "go1.26.0"},
			want:     "(devel) (commit unknown, go1.26.0)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := fromBuildInfo(tc.bi, tc.ok, tc.fallback).String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestGet checks that a test binary, which has build info, reports something.
func TestGet(t *testing.T) {
	t.Parallel()
	if in := Get(); in.Version == "" || in.Commit == "" || in.Go == "" {
		t.Errorf("Get() = %+v, want every field set", in)
	}
}

// TestBuildID checks the Temporal build ID of each kind of build.
func TestBuildID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.2.0", Commit: "4a2f97a"}, "v1.2.0@4a2f97a"},
		{Info{Version: "(devel)", Commit: "4a2f97a", Modified: true}, "(devel)@4a2f97a+modified"},
		{Info{Version: "(devel)", Commit: "unknown"}, "(devel)@unknown"},
	} {
		if got := tc.in.BuildID(); got != tc.want {
			t.Errorf("%+v.BuildID() = %q, want %q", tc.in, got, tc.want)
		}
	}
}
