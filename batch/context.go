package batch

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Phase is the phase of a table's pipeline a row or a batch belongs to, as __phase carries it.
type Phase string

// The phases.
const (
	PhaseSnapshot Phase = "snapshot"
	PhaseStream   Phase = "stream"
)

// PhaseOf returns the phase of a change: snapshot for snapshot reads, stream otherwise.
func PhaseOf(op Op) Phase {
	if op == OpSnapshot {
		return PhaseSnapshot
	}
	return PhaseStream
}

// The context columns, in the order they follow the data columns of every record.
const (
	// ColOp is utf8: insert, update, delete or snapshot-read (Op.String).
	ColOp = "__op"
	// ColPos is utf8: the row's Position in its String form, 0/16B3748:12.
	ColPos = "__pos"
	// ColCommitTS is timestamp[us, UTC]: the commit time of the row's transaction; null for
	// snapshot rows.
	ColCommitTS = "__commit_ts"
	// ColIngestTS is timestamp[us, UTC]: when the record was built.
	ColIngestTS = "__ingest_ts"
	// ColSnapshot is utf8: the snapshot's consistent LSN (0/16B3748) for snapshot rows, null for
	// stream rows.
	ColSnapshot = "__snapshot"
	// ColPhase is utf8: snapshot or stream (Phase).
	ColPhase = "__phase"
)

// NumContextColumns is the number of context columns at the end of every record.
const NumContextColumns = 6

// The names of the context columns in a table's metadata config ({from: commit_ts, as: ...}).
const (
	MetaOp       = "op"
	MetaPos      = "pos"
	MetaCommitTS = "commit_ts"
	MetaIngestTS = "ingest_ts"
	MetaSnapshot = "snapshot"
	MetaPhase    = "phase"
)

// MetadataNames returns the config names of the context columns, in column order.
func MetadataNames() []string {
	return []string{MetaOp, MetaPos, MetaCommitTS, MetaIngestTS, MetaSnapshot, MetaPhase}
}

// ContextColumn returns the record column of a config metadata name (commit_ts -> __commit_ts);
// ok is false for an unknown name.
func ContextColumn(metaName string) (column string, ok bool) {
	switch metaName {
	case MetaOp:
		return ColOp, true
	case MetaPos:
		return ColPos, true
	case MetaCommitTS:
		return ColCommitTS, true
	case MetaIngestTS:
		return ColIngestTS, true
	case MetaSnapshot:
		return ColSnapshot, true
	case MetaPhase:
		return ColPhase, true
	}
	return "", false
}

// ContextFields returns the Arrow fields of the context tail, in order.
func ContextFields() []arrow.Field {
	utc := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	return []arrow.Field{
		{Name: ColOp, Type: arrow.BinaryTypes.String},
		{Name: ColPos, Type: arrow.BinaryTypes.String},
		{Name: ColCommitTS, Type: utc, Nullable: true},
		{Name: ColIngestTS, Type: utc},
		{Name: ColSnapshot, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: ColPhase, Type: arrow.BinaryTypes.String},
	}
}

// ContextIndex returns the index of a context column (ColOp, ...) in a record of a table with
// numData data columns.
func ContextIndex(numData int, column string) (int, bool) {
	for i, f := range [...]string{ColOp, ColPos, ColCommitTS, ColIngestTS, ColSnapshot, ColPhase} {
		if f == column {
			return numData + i, true
		}
	}
	return 0, false
}

// posColumn returns the __pos column of a record built by this package.
func posColumn(rec arrow.RecordBatch) (*array.String, error) {
	n := int(rec.NumCols())
	if n < NumContextColumns {
		return nil, fmt.Errorf("record has %d columns, fewer than the context tail", n)
	}
	i := n - NumContextColumns + 1
	if name := rec.Schema().Field(i).Name; name != ColPos {
		return nil, fmt.Errorf("record column %d is %q, want %s: not a sluice batch record", i, name, ColPos)
	}
	col, ok := rec.Column(i).(*array.String)
	if !ok {
		return nil, fmt.Errorf("record column %s is %s, want utf8", ColPos, rec.Column(i).DataType())
	}
	return col, nil
}

// RowPosition returns the Position of row i of a batch record (from its __pos column).
func RowPosition(rec arrow.RecordBatch, i int) (Position, error) {
	col, err := posColumn(rec)
	if err != nil {
		return Position{}, fmt.Errorf("reading row position: %w", err)
	}
	if i < 0 || i >= col.Len() {
		return Position{}, fmt.Errorf("reading row position: row %d out of range [0,%d)", i, col.Len())
	}
	return ParsePosition(col.Value(i))
}

// RowPositions returns the Position of every row of a batch record, in row order.
func RowPositions(rec arrow.RecordBatch) ([]Position, error) {
	col, err := posColumn(rec)
	if err != nil {
		return nil, fmt.Errorf("reading row positions: %w", err)
	}
	out := make([]Position, col.Len())
	for i := range out {
		if out[i], err = ParsePosition(col.Value(i)); err != nil {
			return nil, fmt.Errorf("reading position of row %d: %w", i, err)
		}
	}
	return out, nil
}

// CountOps counts the rows of rec by their __op value (insert, update, delete, snapshot-read).
// A record without the column counts nothing.
func CountOps(rec arrow.RecordBatch) map[string]int64 {
	idx := rec.Schema().FieldIndices(ColOp)
	if len(idx) == 0 {
		return nil
	}
	col, ok := rec.Column(idx[0]).(*array.String)
	if !ok {
		return nil
	}
	n := map[string]int64{}
	for i := range col.Len() {
		if col.IsValid(i) {
			n[col.Value(i)]++
		}
	}
	return n
}
