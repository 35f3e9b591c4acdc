package batch

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// MaxNameLen is the longest Postgres identifier (NAMEDATALEN-1 bytes); the server truncates
// longer ones, so a longer name never means what it says.
const MaxNameLen = 63

// plainNameRe is a name every destination takes without quoting: letters, digits and _, not
// starting with a digit.
var plainNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// slotNameRe is what Postgres allows in a replication slot's name.
var slotNameRe = regexp.MustCompile(`^[a-z0-9_]+$`)

// PlainName reports whether s is a plain name: letters, digits and _, not starting with a digit.
// Sinks and the config take such names unquoted (a ClickHouse database or table, the position
// store's schema, a metadata column, a part of a target).
func PlainName(s string) bool { return plainNameRe.MatchString(s) }

// ValidSlotName reports whether s is a name Postgres accepts for a replication slot: 1 to
// MaxNameLen lower-case letters, digits and _.
func ValidSlotName(s string) bool { return slotNameRe.MatchString(s) && len(s) <= MaxNameLen }

// ErrEmptyName is the error of a name (or a part of a dotted name) that is empty.
var ErrEmptyName = errors.New("empty name")

// ParseTableName parses a schema-qualified table name in SQL syntax, such as shop.orders or
// shop."Order Items": unquoted names fold to lower case as Postgres folds them, quoted names are
// kept exactly ("" stands for one quote). A name without a schema, or with more than two parts,
// is an error.
func ParseTableName(s string) (TableName, error) {
	parts, err := ParseQualifiedName(s)
	switch {
	case err != nil:
		return TableName{}, fmt.Errorf("parsing table name %q: %w", s, err)
	case len(parts) == 1:
		return TableName{}, fmt.Errorf("parsing table name %q: not schema-qualified; write schema.table, such as public.%s", s, s)
	case len(parts) > 2:
		return TableName{}, fmt.Errorf("parsing table name %q: %d parts; write schema.table (quote names that contain dots)", s, len(parts))
	}
	return TableName{Schema: parts[0], Name: parts[1]}, nil
}

// ParseIdent parses one Postgres identifier in SQL syntax (a column name), as ParseTableName
// parses each part.
func ParseIdent(s string) (string, error) {
	parts, err := ParseQualifiedName(s)
	if err != nil {
		return "", err
	}
	if len(parts) != 1 {
		return "", fmt.Errorf("%q is a qualified name; want one column name", s)
	}
	return parts[0], nil
}

// ParseQualifiedName splits a dotted Postgres name in SQL syntax into its identifiers, each
// parsed as ParseTableName parses a part. Each is at most MaxNameLen bytes.
func ParseQualifiedName(s string) ([]string, error) {
	var parts []string
	for i := 0; ; {
		name, next, err := scanIdent(s, i)
		if err != nil {
			return nil, err
		}
		if len(name) > MaxNameLen {
			return nil, fmt.Errorf("%q is longer than Postgres' %d bytes", name, MaxNameLen)
		}
		parts = append(parts, name)
		if next == len(s) {
			return parts, nil
		}
		if s[next] != '.' {
			return nil, fmt.Errorf("unexpected %q at byte %d; quote names with other characters, as in public.\"Order Items\"", s[next], next)
		}
		i = next + 1
	}
}

// scanIdent reads one identifier of s starting at i; it returns the name and the index after it.
func scanIdent(s string, i int) (string, int, error) {
	if i >= len(s) {
		return "", i, ErrEmptyName
	}
	if s[i] == '"' {
		var b strings.Builder
		for j := i + 1; j < len(s); j++ {
			if s[j] != '"' {
				b.WriteByte(s[j])
				continue
			}
			if j+1 < len(s) && s[j+1] == '"' {
				b.WriteByte('"')
				j++
				continue
			}
			if b.Len() == 0 {
				return "", i, ErrEmptyName
			}
			return b.String(), j + 1, nil
		}
		return "", i, fmt.Errorf("unterminated quoted name in %q", s)
	}
	j := i
	for j < len(s) && isIdentByte(s[j], j == i) {
		j++
	}
	if j == i {
		if s[i] == '.' {
			return "", i, ErrEmptyName
		}
		return "", i, fmt.Errorf("unexpected %q at byte %d; names start with a letter or _, or are quoted as in public.\"Order Items\"", s[i], i)
	}
	return strings.ToLower(s[i:j]), j, nil
}

// isIdentByte reports whether c may appear in an unquoted Postgres identifier.
func isIdentByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c >= 0x80:
		return true
	case c >= '0' && c <= '9', c == '$':
		return !first
	}
	return false
}
