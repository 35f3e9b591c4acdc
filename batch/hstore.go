package batch

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// HstorePair is one key of an hstore value; Value is nil for a NULL value.
type HstorePair struct {
	Key   string
	Value *string
}

// IsHstore reports whether f is a column of the hstore extension type: a utf8 field whose
// MetaPGType is hstore (schema-qualified or not). Such a column carries the text Postgres prints
// (ParseHstore reads it); a sink with a map type stores it as a map. A domain over hstore is
// named by the domain and stays text.
func IsHstore(f arrow.Field) bool {
	if f.Type.ID() != arrow.STRING {
		return false
	}
	name, ok := f.Metadata.GetValue(MetaPGType)
	return ok && IsHstoreType(name)
}

// IsHstoreType reports whether a Column.TypeName (format_type) names the hstore extension type.
func IsHstoreType(typeName string) bool {
	return typeName == "hstore" || strings.HasSuffix(typeName, ".hstore")
}

// ParseHstore reads the text hstore's output function prints: `"k"=>"v", "n"=>NULL`, every key
// and value in double quotes with " and \ escaped by a backslash, an unquoted NULL for a NULL
// value, pairs separated by ", ", the empty string for an empty hstore. Pairs come back in the
// order printed (Postgres' order, keys unique).
func ParseHstore(s string) ([]HstorePair, error) {
	var out []HstorePair
	i := 0
	quoted := func(what string) (string, error) {
		if i >= len(s) || s[i] != '"' {
			return "", fmt.Errorf("hstore: want a quoted %s at byte %d", what, i)
		}
		var b strings.Builder
		for i++; i < len(s); i++ {
			switch c := s[i]; c {
			case '\\':
				i++
				if i == len(s) {
					return "", errors.New("hstore: text ends inside an escape")
				}
				b.WriteByte(s[i])
			case '"':
				i++
				return b.String(), nil
			default:
				b.WriteByte(c)
			}
		}
		return "", fmt.Errorf("hstore: unterminated quoted %s", what)
	}
	for i < len(s) {
		if len(out) > 0 {
			if !strings.HasPrefix(s[i:], ", ") {
				return nil, fmt.Errorf("hstore: want \", \" between pairs at byte %d", i)
			}
			i += 2
		}
		k, err := quoted("key")
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(s[i:], "=>") {
			return nil, fmt.Errorf("hstore: want => after key %q at byte %d", k, i)
		}
		i += 2
		p := HstorePair{Key: k}
		if strings.HasPrefix(s[i:], "NULL") {
			i += 4
		} else {
			v, err := quoted("value")
			if err != nil {
				return nil, err
			}
			p.Value = &v
		}
		out = append(out, p)
	}
	return out, nil
}
