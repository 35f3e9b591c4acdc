package staging

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/sluicecdc/sluice/batch"
)

// Object names have the form
//
//	<pipeline>/<schema>.<table>/<system_id>_<timeline>_<slot>/<lo>-<hi>.arrow
//
// where every name part is escaped so that only [A-Za-z0-9_-] stay literal (a '.' in a schema
// name cannot be confused with the separator), the timeline is 8 hex digits and lo and hi are
// 16 hex digits of LSN followed by 8 hex digits of sequence. Fixed width makes the lexical order
// of names within one table and source the position order.

const fileSuffix = ".arrow"

// escapeName keeps [A-Za-z0-9_-] and writes every other byte as %XX.
func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// unescapeName reverses escapeName.
func unescapeName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("unescaping %q: truncated escape", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("unescaping %q: %w", s, err)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

// pipelinePrefix is the prefix of every object of a pipeline, ending in '/'.
func pipelinePrefix(pipeline string) string { return escapeName(pipeline) + "/" }

// tablePrefix is the prefix of every object of one table of a pipeline, ending in '/'.
func tablePrefix(pipeline string, t batch.TableName) string {
	return pipelinePrefix(pipeline) + escapeName(t.Schema) + "." + escapeName(t.Name) + "/"
}

func sourceSegment(s batch.SourceID) string {
	// '_' separates the parts, so the system id (digits in practice) escapes it too; the slot,
	// being last, may keep it.
	sys := strings.ReplaceAll(escapeName(s.SystemID), "_", "%5F")
	return fmt.Sprintf("%s_%08x_%s", sys, uint32(s.Timeline), escapeName(s.Slot))
}

func positionHex(p batch.Position) string { return fmt.Sprintf("%016x%08x", p.LSN, p.Seq) }

// objectName is the name of the object that stages ref's batch.
func objectName(ref BatchRef) string {
	return tablePrefix(ref.Pipeline, ref.Table) + sourceSegment(ref.Lo.Source) + "/" +
		positionHex(ref.Lo.Position) + "-" + positionHex(ref.Hi.Position) + fileSuffix
}

func parsePositionHex(s string) (batch.Position, error) {
	if len(s) != 24 {
		return batch.Position{}, fmt.Errorf("position %q is not 24 hex digits", s)
	}
	lsn, err := strconv.ParseUint(s[:16], 16, 64)
	if err != nil {
		return batch.Position{}, fmt.Errorf("position %q: %w", s, err)
	}
	seq, err := strconv.ParseUint(s[16:], 16, 32)
	if err != nil {
		return batch.Position{}, fmt.Errorf("position %q: %w", s, err)
	}
	return batch.Position{LSN: lsn, Seq: uint32(seq)}, nil
}

// parseObjectName recovers pipeline, table, source, lo and hi from an object name (without the
// store's prefix). Rows, Bytes, URI and Phase are left for the caller.
func parseObjectName(name string) (BatchRef, error) {
	dir, file := path.Split(name)
	if strings.Count(dir, "/") != 3 {
		return BatchRef{}, fmt.Errorf("staged object %q: want pipeline/schema.table/source/lo-hi%s", name, fileSuffix)
	}
	ref, err := parseDirName(dir)
	if err != nil {
		return BatchRef{}, fmt.Errorf("staged object %q: %w", name, err)
	}
	return withFileName(ref, name, file)
}

// parseDirName recovers pipeline, table and source from the directory part of an object name,
// pipeline/schema.table/source/: what every batch file in it shares.
func parseDirName(dir string) (BatchRef, error) {
	parts := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	if len(parts) != 3 {
		return BatchRef{}, fmt.Errorf("directory %q: want pipeline/schema.table/source", dir)
	}
	var ref BatchRef
	var err error
	if ref.Pipeline, err = unescapeName(parts[0]); err != nil {
		return BatchRef{}, err
	}
	schema, table, ok := strings.Cut(parts[1], ".")
	if !ok {
		return BatchRef{}, fmt.Errorf("table part %q has no schema", parts[1])
	}
	if ref.Table.Schema, err = unescapeName(schema); err != nil {
		return BatchRef{}, err
	}
	if ref.Table.Name, err = unescapeName(table); err != nil {
		return BatchRef{}, err
	}
	src, err := parseSourceSegment(parts[2])
	if err != nil {
		return BatchRef{}, err
	}
	ref.Lo.Source, ref.Hi.Source = src, src
	return ref, nil
}

// withFileName sets lo and hi of dir's ref (parseDirName) from the file name lo-hi.batch of the
// object name.
func withFileName(ref BatchRef, name, file string) (BatchRef, error) {
	if !strings.HasSuffix(file, fileSuffix) {
		return BatchRef{}, fmt.Errorf("staged object %q: want pipeline/schema.table/source/lo-hi%s", name, fileSuffix)
	}
	lo, hi, ok := strings.Cut(strings.TrimSuffix(file, fileSuffix), "-")
	if !ok {
		return BatchRef{}, fmt.Errorf("staged object %q: file name wants lo-hi", name)
	}
	var err error
	if ref.Lo.Position, err = parsePositionHex(lo); err != nil {
		return BatchRef{}, fmt.Errorf("staged object %q: lo: %w", name, err)
	}
	if ref.Hi.Position, err = parsePositionHex(hi); err != nil {
		return BatchRef{}, fmt.Errorf("staged object %q: hi: %w", name, err)
	}
	return ref, nil
}

func parseSourceSegment(s string) (batch.SourceID, error) {
	parts := strings.SplitN(s, "_", 3)
	if len(parts) != 3 {
		return batch.SourceID{}, fmt.Errorf("source part %q: want system_timeline_slot", s)
	}
	sys, err := unescapeName(parts[0])
	if err != nil {
		return batch.SourceID{}, fmt.Errorf("source part %q: %w", s, err)
	}
	tl, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil {
		return batch.SourceID{}, fmt.Errorf("source part %q: timeline: %w", s, err)
	}
	slot, err := unescapeName(parts[2])
	if err != nil {
		return batch.SourceID{}, fmt.Errorf("source part %q: %w", s, err)
	}
	return batch.SourceID{SystemID: sys, Timeline: int32(tl), Slot: slot}, nil
}
