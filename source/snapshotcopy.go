package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
)

// KeyRange bounds a snapshot read to the rows whose first key column, an integer, lies in
// [Lo, Hi); a nil bound is open. The zero KeyRange is every row.
type KeyRange struct {
	Lo *int64 `json:"lo,omitempty"`
	Hi *int64 `json:"hi,omitempty"`
}

// conds returns the range's SQL conditions on the column col (quoted).
func (r KeyRange) conds(col string) []string {
	var out []string
	if r.Lo != nil {
		out = append(out, col+" >= "+strconv.FormatInt(*r.Lo, 10))
	}
	if r.Hi != nil {
		out = append(out, col+" < "+strconv.FormatInt(*r.Hi, 10))
	}
	return out
}

// CopyChunk reads what ScanChunk reads, within rng, through `COPY (SELECT ...) TO STDOUT (FORMAT
// binary)`: Postgres sends each row as its fields' lengths and bytes with no per-row message
// framing of the query protocol, and the values go from the connection's buffer to row. A column
// whose format (formats, as RecordBuilder.BinaryFormats gives them; nil: all text) is
// FormatBinary comes in its type's binary form; the others are selected as the text Postgres
// prints (the output function, through format('%s')), whose binary form is that text. Key
// columns must be text (the next chunk's cursor), as must the first key column when rng is
// bounded, which must be an integer (see SplitKeyRanges). The cursor after is inlined as quoted
// literals: COPY takes no parameters. An error from row ends the rows given to row; the COPY is
// still read to its end so the connection stays usable, and the error is returned as is.
func (s *Snapshot) CopyChunk(ctx context.Context, schema batch.Schema, after []batch.Value, rng KeyRange, limit int, formats []int16,
	row func(c *batch.Change, raw [][]byte) error) (last []batch.Value, err error) {
	if formats == nil {
		formats = make([]int16, len(schema.Columns))
	}
	if err := checkScan(schema, after, limit, formats); err != nil {
		return nil, err
	}
	sql, err := copyChunkQuery(schema, s.where[schema.Table], after, rng, limit, formats)
	if err != nil {
		return nil, failure.Permanent(err)
	}
	keys := schema.KeyIndexes()
	conn, put, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading table %s: %w", schema.Table, err)
	}
	defer put()
	c := batch.Change{Op: batch.OpSnapshot, Pos: batch.Position{LSN: s.lsn}, CommitTS: s.ts}
	lastKey := make([][]byte, len(keys))
	n := 0
	w := &copyRows{raw: make([][]byte, len(schema.Columns)), row: func(raw [][]byte) error {
		if err := row(&c, raw); err != nil {
			return err
		}
		for i, k := range keys {
			lastKey[i] = append(lastKey[i][:0], raw[k]...)
		}
		n++
		return nil
	}}
	if _, err := conn.CopyTo(ctx, w, sql); err != nil {
		return nil, fmt.Errorf("reading table %s under snapshot %s: %w", schema.Table, s.name, err)
	}
	if w.err != nil {
		return nil, w.err
	}
	if !w.done {
		return nil, fmt.Errorf("reading table %s under snapshot %s: the binary COPY ended without its trailer", schema.Table, s.name)
	}
	if n > 0 {
		last = make([]batch.Value, len(schema.Columns))
		for i, k := range keys {
			last[k] = batch.Value{Text: lastKey[i]}
		}
	}
	return last, nil
}

// checkScan checks the arguments of a chunk read: a positive limit, a format per column with
// the key columns text, and a previous row of the schema's width.
func checkScan(schema batch.Schema, after []batch.Value, limit int, formats []int16) error {
	if limit <= 0 {
		return fmt.Errorf("reading table %s: chunk size must be positive, got %d", schema.Table, limit)
	}
	if formats != nil {
		if len(formats) != len(schema.Columns) {
			return fmt.Errorf("reading table %s: %d result formats for %d columns", schema.Table, len(formats), len(schema.Columns))
		}
		for _, k := range schema.KeyIndexes() {
			if formats[k] != batch.FormatText {
				return fmt.Errorf("reading table %s: key column %s must be read as text (it is the next chunk's cursor)", schema.Table, schema.Columns[k].Name)
			}
		}
	}
	if after != nil && len(after) != len(schema.Columns) {
		return fmt.Errorf("reading table %s: the previous row has %d values, the schema %d columns", schema.Table, len(after), len(schema.Columns))
	}
	return nil
}

// copyChunkQuery builds the COPY of one chunk: chunkQuery's SELECT with each text column as the
// text Postgres prints (format's %s calls the type's output function; a cast to text differs
// for some types: inet adds /32, bool prints true, bpchar drops its padding), within rng, after
// the key values of after as literals.
func copyChunkQuery(s batch.Schema, where string, after []batch.Value, rng KeyRange, limit int, formats []int16) (string, error) {
	keys := s.KeyIndexes()
	if len(keys) == 0 {
		return "", fmt.Errorf("table %s has no key columns: keyset pagination needs a key", s.Table)
	}
	cols := make([]string, len(s.Columns))
	for j, c := range s.Columns {
		name := quoteIdent(c.Name)
		cols[j] = name
		if formats[j] != batch.FormatBinary {
			cols[j] = fmt.Sprintf("CASE WHEN num_nulls(%[1]s) = 0 THEN format('%%s', %[1]s) END", name)
		}
	}
	var conds []string
	if where != "" {
		conds = append(conds, "("+where+")")
	}
	conds = append(conds, rng.conds(quoteIdent(s.Columns[keys[0]].Name))...)
	if after != nil {
		names, lits := make([]string, len(keys)), make([]string, len(keys))
		for i, k := range keys {
			names[i] = quoteIdent(s.Columns[k].Name)
			lits[i] = escapeLiteral(after[k].Text)
		}
		conds = append(conds, fmt.Sprintf("(%s) > (%s)", strings.Join(names, ", "), strings.Join(lits, ", ")))
	}
	return "COPY (" + chunkSelect(s, strings.Join(cols, ", "), conds, limit) + ") TO STDOUT (FORMAT binary)", nil
}

// escapeLiteral quotes v as an escape string literal (E'...'), whatever
// standard_conforming_strings is.
func escapeLiteral(v []byte) string {
	var b strings.Builder
	b.WriteString("E'")
	for _, c := range v {
		switch c {
		case '\'':
			b.WriteString("''")
		case '\\':
			b.WriteString(`\\`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// copySignature starts every binary COPY stream.
var copySignature = []byte("PGCOPY\n\xff\r\n\x00")

// copyRows parses a binary COPY stream as pgconn's CopyTo writes it (one CopyData message per
// Write, usually one row; a row split across writes is carried over) and gives each row's
// fields to row: nil for NULL, otherwise aliasing the write's buffer, valid until row returns.
type copyRows struct {
	raw     [][]byte
	row     func(raw [][]byte) error
	header  bool
	done    bool   // the trailer was read
	pending []byte // the start of a row whose end is in a later write
	err     error  // the first error of row; the rows after it are read and dropped
}

// Write parses p. It fails only for a malformed stream (which ends the COPY and closes the
// connection); an error of row is kept in err.
func (w *copyRows) Write(p []byte) (int, error) {
	n := len(p)
	if len(w.pending) > 0 {
		w.pending = append(w.pending, p...)
		p = w.pending
	}
	rest, err := w.parse(p)
	if err != nil {
		return 0, err
	}
	w.pending = append(w.pending[:0], rest...)
	return n, nil
}

// parse reads the whole rows of p and returns what is left of it (an incomplete row).
func (w *copyRows) parse(p []byte) ([]byte, error) {
	if !w.header {
		if len(p) < len(copySignature)+8 {
			return p, nil
		}
		if !bytes.Equal(p[:len(copySignature)], copySignature) {
			return nil, fmt.Errorf("binary COPY: the stream does not start with the PGCOPY signature")
		}
		ext := int(binary.BigEndian.Uint32(p[len(copySignature)+4:]))
		if len(p) < len(copySignature)+8+ext {
			return p, nil
		}
		p = p[len(copySignature)+8+ext:]
		w.header = true
	}
	for len(p) >= 2 {
		if w.done {
			return nil, fmt.Errorf("binary COPY: %d bytes after the trailer", len(p))
		}
		nf := int16(binary.BigEndian.Uint16(p))
		if nf == -1 {
			w.done = true
			p = p[2:]
			continue
		}
		if int(nf) != len(w.raw) {
			return nil, fmt.Errorf("binary COPY: a row of %d fields, want %d", nf, len(w.raw))
		}
		off, whole := 2, true
		for i := range w.raw {
			if len(p) < off+4 {
				whole = false
				break
			}
			l := int(int32(binary.BigEndian.Uint32(p[off:])))
			off += 4
			if l < 0 {
				w.raw[i] = nil
				continue
			}
			if len(p) < off+l {
				whole = false
				break
			}
			w.raw[i] = p[off : off+l : off+l]
			off += l
		}
		if !whole {
			return p, nil
		}
		if w.err == nil {
			w.err = w.row(w.raw)
		}
		p = p[off:]
	}
	return p, nil
}

// SplitKeyRanges splits the table's rows (those its row filter keeps) into at most n ranges of
// its first key column, of equal width between its smallest and largest value under the
// snapshot, in key order; the first is open below and the last above, so together they hold
// every row exactly once. A table whose first key column is not an integer, an empty table or
// n < 2 gives one range of every row.
func (s *Snapshot) SplitKeyRanges(ctx context.Context, schema batch.Schema, n int) ([]KeyRange, error) {
	if n < 2 || !schema.FirstKeyInteger() {
		return []KeyRange{{}}, nil
	}
	col := quoteIdent(schema.Columns[schema.KeyIndexes()[0]].Name)
	sql := fmt.Sprintf("SELECT min(%[1]s)::int8::text, max(%[1]s)::int8::text FROM %[2]s", col, quoteTable(schema.Table))
	if w := s.where[schema.Table]; w != "" {
		sql += " WHERE (" + w + ")"
	}
	row, err := s.queryRow(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("reading the key bounds of table %s: %w", schema.Table, err)
	}
	if row[0] == nil {
		return []KeyRange{{}}, nil
	}
	lo, err1 := strconv.ParseInt(string(row[0]), 10, 64)
	hi, err2 := strconv.ParseInt(string(row[1]), 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("reading the key bounds of table %s: %q and %q are not integers", schema.Table, row[0], row[1])
	}
	return splitRange(lo, hi, n), nil
}

// splitRange splits [lo, hi] into at most n ranges of equal width (open at both ends).
func splitRange(lo, hi int64, n int) []KeyRange {
	width := new(big.Int).Sub(big.NewInt(hi), big.NewInt(lo))
	width.Add(width, big.NewInt(1))
	if width.Cmp(big.NewInt(int64(n))) < 0 {
		n = int(width.Int64())
	}
	out := make([]KeyRange, n)
	var prev *int64
	for i := 1; i < n; i++ {
		b := new(big.Int).Mul(width, big.NewInt(int64(i)))
		b.Div(b, big.NewInt(int64(n)))
		b.Add(b, big.NewInt(lo))
		v := b.Int64()
		out[i-1] = KeyRange{Lo: prev, Hi: &v}
		prev = &v
	}
	out[n-1] = KeyRange{Lo: prev}
	return out
}
