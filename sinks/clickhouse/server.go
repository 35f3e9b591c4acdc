package clickhouse

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicecdc/sluice/config"
)

// Version is a ClickHouse server version, as version() prints it (18.16.1, 23.8.2.7).
type Version struct {
	Major, Minor, Patch int
	Text                string // the full text version() returned
}

// modernSince is the first version whose ReplacingMergeTree takes an is_deleted column and
// whose FINAL hides the rows it marks.
var modernSince = Version{Major: 23, Minor: 2}

// ParseVersion parses the text of SELECT version().
func ParseVersion(s string) (Version, error) {
	v := Version{Text: s}
	parts := strings.SplitN(strings.TrimSpace(s), ".", 4)
	if len(parts) < 2 {
		return v, fmt.Errorf("parsing clickhouse version %q: want major.minor[.patch]", s)
	}
	nums := []*int{&v.Major, &v.Minor, &v.Patch}
	for i := 0; i < len(nums) && i < len(parts); i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return v, fmt.Errorf("parsing clickhouse version %q: %w", s, err)
		}
		*nums[i] = n
	}
	return v, nil
}

// AtLeast reports whether v is at or after w (major and minor only).
func (v Version) AtLeast(w Version) bool {
	if v.Major != w.Major {
		return v.Major > w.Major
	}
	return v.Minor >= w.Minor
}

// SupportsModern reports whether the server has ReplacingMergeTree(version, is_deleted),
// DateTime64, Date32 and Bool: the modern layout.
func (v Version) SupportsModern() bool { return v.AtLeast(modernSince) }

// String returns the version as the server printed it.
func (v Version) String() string { return v.Text }

// chooseSchema resolves Config.Schema against the server's version. Asking for the modern
// layout on an older server is refused with what to do.
func chooseSchema(want string, v Version, addr string) (modern bool, err error) {
	switch want {
	case config.SchemaModern:
		if !v.SupportsModern() {
			return false, fmt.Errorf("sink.clickhouse.schema is %s, but the server at %s runs ClickHouse %s, which has no "+
				"ReplacingMergeTree(version, is_deleted), DateTime64 or Date32 (they need %d.%d or later): "+
				"upgrade the server or set sink.clickhouse.schema to %s (or %s)",
				config.SchemaModern, addr, v, modernSince.Major, modernSince.Minor, config.SchemaCompatible, config.SchemaAuto)
		}
		return true, nil
	case config.SchemaCompatible:
		return false, nil
	}
	return v.SupportsModern(), nil
}
