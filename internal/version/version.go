// Package version says which build of Sluice is running: the module version and the VCS commit
// that the Go toolchain records in the binary (-buildvcs), or, where it recorded none (a build
// outside a git checkout, -buildvcs=false), the values `make build` passes with -ldflags -X.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker only (`make build`: -ldflags "-X github.com/sluicecdc/sluice/internal/version.commit=..."),
// never assigned by code: the fallbacks when the build info holds no VCS commit or module version.
var (
	commit string
	tag    string
)

// Info is what one build is.
type Info struct {
	Version  string // module version, such as v1.2.0 or v0.0.0-20260101120000-4a2f97a1b2c3+dirty; "(devel)" when unknown
	Commit   string // VCS revision; "unknown" when neither the build info nor -ldflags has one
	Modified bool   // the working tree had uncommitted changes at build time
	Go       string // the Go version that built it
}

// Get returns the running binary's Info.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	return fromBuildInfo(bi, ok, Info{Version: tag, Commit: commit, Go: runtime.Version()})
}

// fromBuildInfo is the Info of a build whose build info is bi (when ok), taking fallback's
// values where bi has none.
func fromBuildInfo(bi *debug.BuildInfo, ok bool, fallback Info) Info {
	in := fallback
	if ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			in.Version = v
		}
		if bi.GoVersion != "" {
			in.Go = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	return in
}

// String formats i for --version: "v0.0.0-... (commit 4a2f97a..., modified, go1.26.0)".
func (i Info) String() string {
	mod := ""
	if i.Modified {
		mod = ", modified"
	}
	return fmt.Sprintf("%s (commit %s%s, %s)", i.Version, i.Commit, mod, i.Go)
}

// BuildID names this build to Temporal (worker.Options.BuildID, and the SDK's binary checksum,
// so that the SDK does not md5 the whole worker binary at every start): the module version and
// commit, "+modified" for a build from a changed tree.
func (i Info) BuildID() string {
	id := i.Version + "@" + i.Commit
	if i.Modified {
		id += "+modified"
	}
	return id
}
