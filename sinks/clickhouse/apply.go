package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"
	chcolumn "github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// asyncInsertSince is the first version that knows the async_insert setting.
var asyncInsertSince = Version{Major: 21, Minor: 11}

// Apply writes b as one INSERT of one block: every row of the record (upserts with
// _is_deleted 0, deletes as tombstones with _is_deleted 1) with _version set to the row's commit
// LSN, plus, when b.Hi is set, one marker row carrying b.Hi. One block becomes one part, and a
// part appears whole or not at all, so the rows and the position commit together. Snapshot
// chunks (zero Hi) write rows only; an empty record with a Hi (the end of a snapshot) writes the
// marker only. Its guard (see sinks.Sink) reads the position and skips a batch the table holds
// (batch.Covered says CoverAll): rows of one transaction cut into several batches share a
// version, and among equal versions the last insert wins, so a replayed earlier batch would
// overwrite the later one's rows.
func (s *Sink) Apply(ctx context.Context, b sinks.Batch) error {
	l, ok, err := s.layoutOf(ctx, b.Spec)
	if err != nil {
		return err
	}
	if !ok {
		return sinks.Poisonf("table %s: clickhouse table %s does not exist (dropped while the pipeline ran?); "+
			"resume the table so it is created again", b.Spec.Schema.Table, b.Spec.Target)
	}
	// A snapshot chunk (zero Hi) moves no position: nothing to guard, no position to read.
	marker := !b.Hi.Position.IsZero()
	if marker {
		if done, err := s.guard(ctx, l, b); done || err != nil {
			return err
		}
	}
	rec := b.Record
	if rec == nil {
		if !marker {
			return nil
		}
		empty, err := emptyRecord(b.Spec)
		if err != nil {
			return err
		}
		defer empty.Release()
		rec = empty
	}
	if rec.NumRows() == 0 && !marker {
		return nil
	}
	if s.afterGuard != nil {
		s.afterGuard(ctx)
	}
	start := time.Now()
	cols, err := l.converter(rec, b.Hi, marker)
	if err != nil {
		return err
	}
	if err := s.insert(ctx, l, cols, int(rec.NumRows())+1); err != nil {
		return err
	}
	s.log.DebugContext(ctx, "committed batch", logkey.Table, l.source, logkey.Rows, rec.NumRows(), logkey.Hi, b.Hi.String(),
		logkey.Phase, string(b.Phase), logkey.Took, time.Since(start))
	return nil
}

// guard reports whether the table already holds all of b (batch.Covered says CoverAll). A
// committed position of another source is poison.
func (s *Sink) guard(ctx context.Context, l *layout, b sinks.Batch) (bool, error) {
	pos, has, err := s.position(ctx, l.tableRef)
	if err != nil {
		return false, err
	}
	cover, err := batch.Covered(pos, has, b.Phase, b.Lo, b.Hi)
	if err != nil {
		return false, sinks.Poisonf("table %s: batch up to %s does not belong to the source of the committed position %s; "+
			"resync the table", l.source, b.Hi, pos)
	}
	if cover == batch.CoverAll {
		s.log.DebugContext(ctx, "batch already committed", logkey.Table, l.source, logkey.Position, pos.String(), logkey.Hi, b.Hi.String())
		return true, nil
	}
	return false, nil
}

// insert sends the columns as one block. max_insert_block_size above the block's rows keeps the
// server from splitting it (it does not split native blocks, but the setting makes it explicit);
// async_insert 0 keeps a server-side profile from buffering it with other inserts. Each column
// of the driver's block is filled straight from the record (converter.fill), so a large batch
// holds its record and the block, never a column of Go values. A value the column cannot hold
// aborts the insert.
func (s *Sink) insert(ctx context.Context, l *layout, conv *converter, rows int) error {
	settings := clickhouse.Settings{"max_insert_block_size": max(rows+1, 1048576)}
	if s.version.AtLeast(asyncInsertSince) {
		settings["async_insert"] = 0
	}
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(settings))
	bt, err := s.conn.PrepareBatch(ctx, l.insertSQL())
	if err != nil {
		if c := exceptionCode(err); c == codeUnknownTable || c == codeUnknownDatabase {
			s.forget(l.db, l.name)
		}
		return s.droppedColumn(ctx, l, err)
	}
	cols := bt.Columns()
	if len(cols) != len(l.cols) {
		_ = bt.Abort()
		return sinks.Poisonf("table %s: the insert into %s.%s has %d columns, the table's layout %d", l.source, l.db, l.name,
			len(cols), len(l.cols))
	}
	for i := range l.cols {
		if err := conv.fill(i, cols[i]); err != nil {
			_ = bt.Abort()
			return err
		}
	}
	if err := bt.Send(); err != nil {
		return classify(err, "table %s: inserting %d rows into %s.%s", l.source, rows, l.db, l.name)
	}
	return nil
}

// emptyRecord returns a record of spec's table with no rows.
func emptyRecord(spec sinks.TableSpec) (arrow.RecordBatch, error) {
	as, err := batch.ArrowSchema(spec.Schema)
	if err != nil {
		return nil, sinks.Poisonf("table %s: %w", spec.Schema.Table, err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer rb.Release()
	return rb.NewRecordBatch(), nil
}

// converter fills the columns of an insert's block with the rows of a record, and when marker is
// set one marker row carrying hi, one column at a time, through their Native encoding (native.go).
type converter struct {
	l         *layout
	rec       arrow.RecordBatch
	hi        batch.SourcePosition
	marker    bool
	positions []batch.Position
	ops       *array.String
	native    *nativeFiller
}

// converter checks rec against l and returns its converter.
func (l *layout) converter(rec arrow.RecordBatch, hi batch.SourcePosition, marker bool) (*converter, error) {
	if err := l.checkRecord(rec); err != nil {
		return nil, err
	}
	positions, err := batch.RowPositions(rec)
	if err != nil {
		return nil, sinks.Poisonf("table %s: %w", l.source, err)
	}
	opIdx, _ := batch.ContextIndex(l.numData, batch.ColOp)
	ops, ok := rec.Column(opIdx).(*array.String)
	if !ok {
		return nil, sinks.Poisonf("table %s: record column %s is %s, want utf8", l.source, batch.ColOp, rec.Column(opIdx).DataType())
	}
	return &converter{l: l, rec: rec, hi: hi, marker: marker, positions: positions, ops: ops, native: newNativeFiller()}, nil
}

// rows returns the rows of the insert: the record's, plus the marker row.
func (cv *converter) rows() int {
	if cv.marker {
		return int(cv.rec.NumRows()) + 1
	}
	return int(cv.rec.NumRows())
}

// fill fills col, column i of the insert's block, which must be empty. A column whose type in
// the block is not the one l writes is poison (retypedColumn), as is a value it cannot hold.
func (cv *converter) fill(i int, col chcolumn.Interface) error {
	l, c := cv.l, cv.l.cols[i]
	if have := string(col.Type()); have != c.typ {
		return retypedColumn(l, c, have)
	}
	secs, err := cv.sections(i)
	if err != nil {
		return err
	}
	if err := cv.native.fill(col, cv.rows(), secs); err != nil {
		return sinks.Poison(fmt.Errorf("table %s: filling column %s (%s) of the insert into %s.%s: %w",
			l.source, c.name, c.typ, l.db, l.name, err))
	}
	return nil
}

// sections returns the Native encoding of column i of l.
func (cv *converter) sections(i int) ([]section, error) {
	l, c := cv.l, cv.l.cols[i]
	n := int(cv.rec.NumRows())
	extra := cv.rows() - n
	switch c.role {
	case roleData, roleMeta:
		secs, err := dataSections(cv.rec.Column(c.field), l.modern, c.nullable, extra)
		if err != nil {
			return nil, l.valueError(c, cv.positions, err)
		}
		return secs, nil
	case roleVersion:
		return []section{
			{n, func(b *proto.Buffer, from, to int) {
				for _, p := range cv.positions[from:to] {
					b.PutUInt64(p.LSN)
				}
			}},
			{extra, func(b *proto.Buffer, from, to int) {
				for range to - from {
					b.PutUInt64(cv.hi.Position.LSN)
				}
			}},
		}, nil
	case roleDeleted:
		del := batch.OpDelete.String()
		return []section{
			{n, func(b *proto.Buffer, from, to int) {
				for r := from; r < to; r++ {
					b.PutBool(cv.ops.Value(r) == del)
				}
			}},
			{extra, repeat(1)}, // the marker is a tombstone too, so FINAL and the view hide it
		}, nil
	case roleMarker:
		return []section{{n, zeros(1)}, {extra, repeat(1)}}, nil
	case rolePosition:
		pos := cv.hi.String()
		return []section{{n, zeros(1)}, {extra, func(b *proto.Buffer, from, to int) {
			for range to - from {
				b.PutString(pos)
			}
		}}}, nil
	}
	return nil, fmt.Errorf("table %s: column %s has no role", l.source, c.name)
}

// checkRecord checks that rec has the spec's columns then the context tail.
func (l *layout) checkRecord(rec arrow.RecordBatch) error {
	if int(rec.NumCols()) != l.numData+batch.NumContextColumns {
		return sinks.Poisonf("table %s: the batch has %d columns, the table's schema %d plus %d context columns; "+
			"the batch was staged with another schema: resync the table", l.source, rec.NumCols(), l.numData, batch.NumContextColumns)
	}
	for _, c := range l.cols {
		if c.role != roleData {
			continue
		}
		if got := rec.Schema().Field(c.field).Name; got != c.name {
			return sinks.Poisonf("table %s: batch column %d is %q, the table's schema says %q; the batch was staged "+
				"with another schema: resync the table", l.source, c.field+1, got, c.name)
		}
	}
	return nil
}

// valueError turns a conversion error of column c into poison naming the table, column and row.
func (l *layout) valueError(c column, positions []batch.Position, err error) error {
	var re *rangeError
	if errors.As(err, &re) && re.row >= 0 && re.row < len(positions) {
		return sinks.Poison(fmt.Errorf("table %s column %q (ClickHouse %s), row at %s: %w", l.source, c.name, c.typ, positions[re.row], err))
	}
	return sinks.Poison(fmt.Errorf("table %s column %q (ClickHouse %s): %w", l.source, c.name, c.typ, err))
}

// retypedColumn returns the poison error of a column whose type in ClickHouse (have, as the
// insert's block reports it) is not the type Sluice writes for it, with the fix. Its values
// cannot go in: they are encoded for the type Sluice writes.
func retypedColumn(l *layout, c column, have string) error {
	return sinks.Poisonf("table %s: column %s of %s.%s is %s in ClickHouse, but Sluice writes %s for it (was it "+
		"changed outside Sluice?); change it back with ALTER TABLE %s MODIFY COLUMN %s %s, or drop the table to "+
		"backfill it again, then resume the table", l.source, c.name, l.db, l.name, have, c.typ,
		l.qualified(), quote(c.name), c.typ)
}
