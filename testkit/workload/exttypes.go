package workload

import (
	"fmt"
	"strconv"
	"strings"
)

// labelRunes are the characters of an ltree label.
const labelRunes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

// moods are the labels of the enum wl_mood.
var moods = []string{"sad", "ok", "happy", "so so"}

// word returns 1 to n characters of alphabet.
func (g valueGen) word(alphabet string, n int) string {
	b := make([]byte, 1+g.rng.IntN(n))
	for i := range b {
		b[i] = alphabet[g.rng.IntN(len(alphabet))]
	}
	return string(b)
}

// intOrNull returns an integer literal in [-n, n), or NULL now and then.
func (g valueGen) intOrNull(n int) string {
	if g.rng.IntN(6) == 0 {
		return "NULL"
	}
	return strconv.Itoa(g.rng.IntN(2*n) - n)
}

// textKindLiteral returns a random SQL literal of a kind carried as the text Postgres prints
// (and of oid), or "" for other kinds.
func (g valueGen) textKindLiteral(c Column) string {
	switch c.Kind {
	case Citext:
		return quote(g.text(0, 30))
	case Hstore:
		n := g.rng.IntN(4)
		keys, vals := make([]string, n), make([]string, n)
		for i := range n {
			keys[i], vals[i] = quote(g.text(1, 6)), quote(g.text(0, 8))
			if g.rng.IntN(5) == 0 {
				vals[i] = "NULL"
			}
		}
		return fmt.Sprintf("hstore(ARRAY[%s]::text[], ARRAY[%s]::text[])", strings.Join(keys, ", "), strings.Join(vals, ", "))
	case Ltree:
		labels := make([]string, g.rng.IntN(5))
		for i := range labels {
			labels[i] = g.word(labelRunes, 8)
		}
		return quote(strings.Join(labels, ".")) + "::ltree"
	case Money:
		return fmt.Sprintf("(%d.%02d)::numeric::money", g.rng.IntN(2_000_000_000)-1_000_000_000, g.rng.IntN(100))
	case Macaddr:
		parts := make([]string, 6)
		for i := range parts {
			parts[i] = fmt.Sprintf("%02x", g.rng.IntN(256))
		}
		return quote(strings.Join(parts, ":")) + "::macaddr"
	case Bit:
		return "B'" + g.bits(8) + "'"
	case Varbit:
		return "B'" + g.bits(g.rng.IntN(21)) + "'::varbit"
	case Timetz:
		off := (g.rng.IntN(53) - 24) * 30 // -12:00 to +14:00 in half hours
		sign := '+'
		if off < 0 {
			sign, off = '-', -off
		}
		return quote(fmt.Sprintf("%02d:%02d:%02d.%06d%c%02d:%02d", g.rng.IntN(24), g.rng.IntN(60), g.rng.IntN(60),
			g.rng.IntN(1_000_000), sign, off/60, off%60)) + "::timetz"
	case XML:
		return fmt.Sprintf("xmlelement(name r, xmlattributes(%s AS a), %s)", quote(g.text(0, 8)), quote(g.text(0, 20)))
	case Tsvector:
		return "to_tsvector('simple', " + quote(g.text(0, 40)) + ")"
	case Int4Range:
		if g.rng.IntN(8) == 0 {
			return "'empty'::int4range"
		}
		lo := g.rng.IntN(2000) - 1000
		hi, los := lo+g.rng.IntN(100), strconv.Itoa(lo)
		if g.rng.IntN(6) == 0 {
			los = "NULL" // unbounded below
		}
		return fmt.Sprintf("int4range(%s, %d, '%s')", los, hi, []string{"[]", "[)", "(]", "()"}[g.rng.IntN(4)])
	case Composite:
		s := "NULL"
		if g.rng.IntN(6) != 0 {
			s = quote(g.text(0, 12))
		}
		return fmt.Sprintf("ROW(%s, %s)::wl_pair", g.intOrNull(1000), s)
	case IntMatrix:
		rows, cols := 1+g.rng.IntN(3), 1+g.rng.IntN(3)
		elems := make([]string, rows)
		for i := range elems {
			row := make([]string, cols)
			for j := range row {
				row[j] = g.intOrNull(1 << 30)
			}
			elems[i] = "{" + strings.Join(row, ",") + "}"
		}
		bounds := ""
		if g.rng.IntN(4) == 0 { // lower bounds other than 1 print in the value's text
			bounds = fmt.Sprintf("[0:%d][-1:%d]=", rows-1, cols-2)
		}
		return quote(bounds+"{"+strings.Join(elems, ",")+"}") + "::integer[]"
	case Enum:
		return quote(moods[g.rng.IntN(len(moods))]) + "::wl_mood"
	case Geometry:
		x, y := g.coord(1_000_000), g.coord(1_000_000)
		switch g.rng.IntN(3) {
		case 0:
			return fmt.Sprintf("ST_MakePoint(%s, %s)", x, y)
		case 1:
			return fmt.Sprintf("ST_SetSRID(ST_MakePoint(%s, %s), 4326)", g.coord(180), g.coord(90))
		}
		return fmt.Sprintf("ST_GeomFromText('LINESTRING(%s %s, %s %s, %s %s)', 3857)", x, y, g.coord(1_000_000), g.coord(1_000_000), y, x)
	case Geography:
		return fmt.Sprintf("ST_MakePoint(%s, %s)::geography", g.coord(180), g.coord(90))
	case OID:
		return strconv.FormatUint(uint64(g.rng.Uint32()), 10) + "::oid"
	case Interval:
		return g.interval()
	case IntervalArray:
		elems := make([]string, g.rng.IntN(4))
		for i := range elems {
			elems[i] = g.interval()
			if g.rng.IntN(6) == 0 {
				elems[i] = "NULL"
			}
		}
		return "ARRAY[" + strings.Join(elems, ", ") + "]::interval[]"
	}
	return ""
}

// interval returns an interval literal whose months, days and time part each have their own
// sign (or are zero), with microseconds: the cases whose ISO 8601 text is easy to get wrong.
func (g valueGen) interval() string {
	part := func(n int) int {
		if g.rng.IntN(3) == 0 {
			return 0
		}
		return g.rng.IntN(2*n+1) - n
	}
	us := int64(part(1_000_000)) * int64(g.rng.IntN(200_000)+1) // up to about ±55 hours
	return fmt.Sprintf("make_interval(months => %d, days => %d, secs => %d / 1e6)", part(400), part(90), us)
}

// bits returns n random binary digits.
func (g valueGen) bits(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + g.rng.IntN(2))
	}
	return string(b)
}

// coord returns a number in [-max, max] with up to 4 decimals.
func (g valueGen) coord(max int) string {
	return strconv.FormatFloat(float64(g.rng.IntN(2*max*10_000+1)-max*10_000)/10_000, 'f', -1, 64)
}

// toastLiteral returns a value of c's kind of 9 to 12 KB, stored out of line.
func (g valueGen) toastLiteral(c Column) string {
	if c.Kind == Hstore {
		return "hstore('big', " + quote(g.toastText()) + ")"
	}
	return quote(g.toastText())
}
