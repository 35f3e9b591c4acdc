package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Name rules. Pipeline names end up in workflow IDs and, with - turned into _, in slot names.
var (
	pipelineRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	slotRe        = regexp.MustCompile(`^[a-z0-9_]+$`)
	publicationRe = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	identRe       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	collectionRe  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_%-]*$`)
	catalogNameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]*$`)
)

const (
	// maxPipelineLen keeps the default slot name sluice_<pipeline> within Postgres' 63 bytes.
	maxPipelineLen = 63 - len("sluice_")
	// maxPGName is the longest Postgres identifier; longer ones are truncated by the server.
	maxPGName = 63
)

// validPipeline reports whether name is a valid pipeline name.
func validPipeline(name string) bool {
	return pipelineRe.MatchString(name) && len(name) <= maxPipelineLen
}

// DefaultSlotName returns the default slot and publication name of a pipeline:
// sluice_<pipeline> with - turned into _, since slot names allow only [a-z0-9_].
func DefaultSlotName(pipeline string) string {
	return "sluice_" + strings.ReplaceAll(pipeline, "-", "_")
}

// DefaultTaskQueue returns the default task queue of a pipeline: sluice-<pipeline>. Every
// pipeline gets its own queue, so pipelines sharing a Temporal namespace never take each other's
// tasks (a worker serves only the pipeline its config names).
func DefaultTaskQueue(pipeline string) string {
	return "sluice-" + pipeline
}

var errEmptyIdent = errors.New("empty name")

// parseIdent parses one Postgres identifier in SQL syntax: an unquoted name, folded to lower
// case as Postgres folds it, or a double-quoted name kept exactly ("" stands for one quote).
func parseIdent(s string) (string, error) {
	parts, err := parseQualified(s)
	if err != nil {
		return "", err
	}
	if len(parts) != 1 {
		return "", fmt.Errorf("%q is a qualified name; want one column name", s)
	}
	return parts[0], nil
}

// parseQualified splits a dotted Postgres name in SQL syntax into its identifiers.
func parseQualified(s string) ([]string, error) {
	var parts []string
	for i := 0; ; {
		name, next, err := scanIdent(s, i)
		if err != nil {
			return nil, err
		}
		if len(name) > maxPGName {
			return nil, fmt.Errorf("%q is longer than Postgres' %d bytes", name, maxPGName)
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
		return "", i, errEmptyIdent
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
				return "", i, errEmptyIdent
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
			return "", i, errEmptyIdent
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

// targetParts splits a destination name at its dots and checks every part against re.
func targetParts(target string, re *regexp.Regexp) ([]string, bool) {
	parts := strings.Split(target, ".")
	for _, p := range parts {
		if !re.MatchString(p) {
			return nil, false
		}
	}
	return parts, true
}
