package batch

import "strings"

// arrayElem is one element of a parsed array literal: buf[start:end] of the arrayParser, or NULL.
type arrayElement struct {
	start, end int
	null       bool
}

// arrayParser splits Postgres array text ({a,"b c",NULL}) into elements. It keeps its buffers
// between calls so parsing does not allocate once they have grown.
type arrayParser struct {
	buf   []byte // unescaped element text
	elems []arrayElement
}

// multiDimHint says what to do with a multi-dimensional array.
const multiDimHint = "a column declared one-dimensional maps to an arrow list, and Postgres does not " +
	"enforce the declared dimensions; declare the column multi-dimensional (ALTER TABLE ... ALTER COLUMN ... " +
	"TYPE int[][], no rewrite) so it is carried as the array's text, then resync the table"

func isArraySpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// lowerBoundHint says what to do with a one-dimensional array whose lower bound is not 1.
const lowerBoundHint = "an arrow list numbers its elements from the start and cannot hold the array's lower bound, " +
	"which would be lost; store the arrays from index 1 in the source (UPDATE ... SET c = c[array_lower(c, 1):array_upper(c, 1)] " +
	"renumbers one from 1), or declare the column multi-dimensional (ALTER TABLE ... ALTER COLUMN ... TYPE int[][], no " +
	"rewrite) so it is carried as the array's text with its bounds; then resync the table"

// parse splits v into p.elems. A dimension decoration ([2:3]={...}, which Postgres prints for
// lower bounds other than 1) is accepted for one dimension starting at 1 only: a list cannot
// keep another lower bound, so that is a not-representable error rather than a silent loss, as
// are nested braces (multi-dimensional arrays).
func (p *arrayParser) parse(v []byte) error {
	p.buf, p.elems = p.buf[:0], p.elems[:0]
	i := skipSpace(v, 0)
	if i < len(v) && v[i] == '[' {
		dims, start := 0, i
		for i < len(v) && v[i] == '[' {
			for i < len(v) && v[i] != ']' {
				i++
			}
			i++
			dims++
		}
		if dims > 1 {
			return notRepresentable(multiDimHint, "multi-dimensional array")
		}
		if i >= len(v) || v[i] != '=' {
			return malformed("invalid array dimension decoration")
		}
		if lower, ok := lowerBound(v[start:i]); !ok {
			return malformed("invalid array dimension decoration")
		} else if lower != "1" {
			return notRepresentable(lowerBoundHint, "one-dimensional array with lower bound %s (%s)", lower, v[start:i])
		}
		i = skipSpace(v, i+1)
	}
	if i >= len(v) || v[i] != '{' {
		return malformed("array does not start with {")
	}
	i = skipSpace(v, i+1)
	if i < len(v) && v[i] == '}' {
		return p.end(v, i+1)
	}
	for {
		i = skipSpace(v, i)
		if i >= len(v) {
			return malformed("unterminated array")
		}
		var err error
		switch v[i] {
		case '{':
			return notRepresentable(multiDimHint, "multi-dimensional array")
		case '"':
			i, err = p.quoted(v, i+1)
		default:
			i, err = p.unquoted(v, i)
		}
		if err != nil {
			return err
		}
		i = skipSpace(v, i)
		if i >= len(v) {
			return malformed("unterminated array")
		}
		switch v[i] {
		case ',':
			i++
		case '}':
			return p.end(v, i+1)
		default:
			return malformed("unexpected %q in array", v[i])
		}
	}
}

// lowerBound returns the lower bound of a one-dimension decoration "[lo:hi]", as written.
func lowerBound(dec []byte) (string, bool) {
	if len(dec) < 2 || dec[0] != '[' || dec[len(dec)-1] != ']' {
		return "", false
	}
	lo, _, ok := strings.Cut(string(dec[1:len(dec)-1]), ":")
	lo = strings.TrimSpace(lo)
	if !ok || lo == "" {
		return "", false
	}
	for i, c := range lo {
		if (c < '0' || c > '9') && !(i == 0 && (c == '-' || c == '+')) {
			return "", false
		}
	}
	return lo, true
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && isArraySpace(v[i]) {
		i++
	}
	return i
}

// end checks that nothing but space follows the closing brace at v[i-1].
func (p *arrayParser) end(v []byte, i int) error {
	if skipSpace(v, i) != len(v) {
		return malformed("text after the end of the array")
	}
	return nil
}

// quoted reads a double-quoted element starting after the quote; a backslash escapes the next
// character. It returns the index after the closing quote.
func (p *arrayParser) quoted(v []byte, i int) (int, error) {
	start := len(p.buf)
	for i < len(v) {
		c := v[i]
		switch c {
		case '\\':
			if i+1 >= len(v) {
				return 0, malformed("unterminated escape in array")
			}
			p.buf = append(p.buf, v[i+1])
			i += 2
			continue
		case '"':
			p.elems = append(p.elems, arrayElement{start: start, end: len(p.buf)})
			return i + 1, nil
		}
		p.buf = append(p.buf, c)
		i++
	}
	return 0, malformed("unterminated quoted array element")
}

// unquoted reads an element up to a comma or closing brace. Surrounding space is dropped, a
// backslash escapes the next character, and NULL (any case, without quotes or escapes) is NULL.
func (p *arrayParser) unquoted(v []byte, i int) (int, error) {
	start := len(p.buf)
	escaped := false
	keep := start // p.buf length up to the last non-space or escaped character
	for i < len(v) {
		c := v[i]
		if c == ',' || c == '}' {
			break
		}
		if c == '{' || c == '"' {
			return 0, malformed("unexpected %q in array element", c)
		}
		if c == '\\' {
			if i+1 >= len(v) {
				return 0, malformed("unterminated escape in array")
			}
			p.buf = append(p.buf, v[i+1])
			escaped = true
			keep = len(p.buf)
			i += 2
			continue
		}
		p.buf = append(p.buf, c)
		if !isArraySpace(c) {
			keep = len(p.buf)
		}
		i++
	}
	p.buf = p.buf[:keep]
	if keep == start && !escaped {
		return 0, malformed("empty unquoted array element")
	}
	e := p.buf[start:keep]
	null := !escaped && len(e) == 4 && (e[0]|0x20) == 'n' && (e[1]|0x20) == 'u' && (e[2]|0x20) == 'l' && (e[3]|0x20) == 'l'
	p.elems = append(p.elems, arrayElement{start: start, end: keep, null: null})
	return i, nil
}
