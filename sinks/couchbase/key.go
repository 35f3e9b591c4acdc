package couchbase

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// maxKeyLen is the longest document key Couchbase accepts, in bytes.
const maxKeyLen = 250

// keySeparator joins the components of a composite key.
const keySeparator = "::"

// keyEncoder builds the document key of a row from its key columns.
type keyEncoder struct {
	cols    []arrow.Array
	rawJSON []bool
	buf     []byte
}

// key returns the document key of row i: the text of a single key column as the package doc
// describes it, or the texts of a composite key with % and : escaped (%25, %3A) joined by ::.
// An empty key, a key longer than 250 bytes and a key that is not UTF-8 are errors.
func (e *keyEncoder) key(i int) (string, error) {
	e.buf = e.buf[:0]
	for j, col := range e.cols {
		if col.IsNull(i) {
			return "", fmt.Errorf("key column %d is null", j+1)
		}
		if j > 0 {
			e.buf = append(e.buf, keySeparator...)
		}
		start := len(e.buf)
		var err error
		if e.buf, _, err = appendText(e.buf, col, i, e.rawJSON[j]); err != nil {
			return "", err
		}
		if len(e.cols) > 1 {
			e.buf = append(e.buf[:start], escapeComponent(string(e.buf[start:]))...)
		}
	}
	k := string(e.buf)
	switch {
	case k == "":
		return "", fmt.Errorf("the key is empty; Couchbase document keys need at least one byte")
	case len(k) > maxKeyLen:
		return "", fmt.Errorf("the key %q... is %d bytes; Couchbase document keys hold at most %d",
			shorten(k), len(k), maxKeyLen)
	case !utf8.ValidString(k):
		return "", fmt.Errorf("the key %q is not UTF-8", shorten(k))
	}
	return k, nil
}

// escapeComponent escapes % and : in one component of a composite key, so that :: only ever
// separates components and two different keys never give the same document key.
func escapeComponent(s string) string {
	if !strings.ContainsAny(s, "%:") {
		return s
	}
	return strings.NewReplacer("%", "%25", ":", "%3A").Replace(s)
}

// shorten cuts a value for an error message.
func shorten(s string) string {
	const n = 60
	if len(s) <= n {
		return s
	}
	for i := n; i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i]
		}
	}
	return s[:n]
}
