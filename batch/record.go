package batch

import (
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// encoder appends the values of one column (or the elements of a list) to its Arrow builder.
type encoder struct {
	kind        kind
	appendValue func(v []byte) error // returns a *convError for a bad value
	appendNull  func()
	reserveData func(n int) // reserves data bytes of variable-width columns; nil otherwise
	// appendBinary appends a value in Postgres' binary format; nil for the kinds read as text
	// only (see binaryAppender).
	appendBinary func(v []byte) error
}

// RecordBuilder builds the Arrow records of one table from its changes: the data columns in
// Schema order, then the context tail. It keeps its Arrow builders and scratch buffers between
// records, so build every record of a table with one RecordBuilder. It is not safe for
// concurrent use.
type RecordBuilder struct {
	table   TableName
	columns []Column
	rb      *array.RecordBuilder
	enc     []encoder
	// The text of the last position and snapshot LSN appended: snapshot rows all share one,
	// so it is formatted once per record rather than once per row.
	lastPos           Position
	posText, snapText []byte

	op, pos, snap, phase *array.StringBuilder
	commitTS, ingestTS   *array.TimestampBuilder
}

// NewRecordBuilder returns a RecordBuilder for schema, or the error of ArrowSchema. Call Release
// when done.
func NewRecordBuilder(mem memory.Allocator, schema Schema) (*RecordBuilder, error) {
	as, err := ArrowSchema(schema)
	if err != nil {
		return nil, err
	}
	b := &RecordBuilder{table: schema.Table, columns: schema.Columns, rb: array.NewRecordBuilder(mem, as)}
	for i := range schema.Columns {
		b.enc = append(b.enc, newColumnEncoder(resolveColumn(&schema.Columns[i]), b.rb.Field(i)))
	}
	n := len(schema.Columns)
	b.op = b.rb.Field(n).(*array.StringBuilder)
	b.pos = b.rb.Field(n + 1).(*array.StringBuilder)
	b.commitTS = b.rb.Field(n + 2).(*array.TimestampBuilder)
	b.ingestTS = b.rb.Field(n + 3).(*array.TimestampBuilder)
	b.snap = b.rb.Field(n + 4).(*array.StringBuilder)
	b.phase = b.rb.Field(n + 5).(*array.StringBuilder)
	return b, nil
}

// Schema returns the Arrow schema of the records (the same as ArrowSchema's).
func (b *RecordBuilder) Schema() *arrow.Schema { return b.rb.Schema() }

// Release frees the builders.
func (b *RecordBuilder) Release() { b.rb.Release() }

// Build returns the record of rows (collapsed or not; rows are taken in order). ingest is the
// value of __ingest_ts. Every value must be resolved: an Unchanged value is an
// ErrUnresolvedTOAST ValueError, a NULL key an ErrMalformedValue one; a value the mapping
// cannot convert is a ValueError naming the table, column and value. The caller releases the
// record.
func (b *RecordBuilder) Build(rows []Change, ingest time.Time) (arrow.RecordBatch, error) {
	if err := b.build(rows, ingest); err != nil {
		b.reset()
		return nil, err
	}
	return b.rb.NewRecordBatch(), nil
}

func (b *RecordBuilder) build(rows []Change, ingest time.Time) error {
	for i := range rows {
		if len(rows[i].Values) != len(b.columns) {
			return fmt.Errorf("building record of %s: row at %s has %d values, the table has %d columns",
				b.table, rows[i].Pos, len(rows[i].Values), len(b.columns))
		}
	}
	b.rb.Reserve(len(rows))
	for j := range b.columns {
		if err := b.buildColumn(j, rows); err != nil {
			return err
		}
	}
	b.buildContext(rows, ingest)
	return nil
}

func (b *RecordBuilder) buildColumn(j int, rows []Change) error {
	col, enc := &b.columns[j], &b.enc[j]
	if enc.reserveData != nil {
		n := 0
		for i := range rows {
			n += len(rows[i].Values[j].Text)
		}
		enc.reserveData(n)
	}
	for i := range rows {
		v := &rows[i].Values[j]
		switch {
		case v.Unchanged:
			return &ValueError{Table: b.table, Column: col.Name, Type: col.TypeName, Kind: ErrUnresolvedTOAST,
				Reason: fmt.Sprintf("row at %s keeps an unchanged TOAST value that was not resolved", rows[i].Pos),
				Hint:   "the source must fetch the current value before building the record"}
		case v.Null:
			if col.Key {
				return &ValueError{Table: b.table, Column: col.Name, Type: col.TypeName, Kind: ErrMalformedValue,
					Reason: fmt.Sprintf("row at %s has a NULL key column", rows[i].Pos),
					Hint:   "key columns must be NOT NULL; check the table's primary key or configured key"}
			}
			enc.appendNull()
		default:
			if err := enc.appendValue(v.Text); err != nil {
				return valueError(b.table, col, v.Text, err)
			}
		}
	}
	return nil
}

func (b *RecordBuilder) buildContext(rows []Change, ingest time.Time) {
	ingestTS := arrow.Timestamp(ingest.UnixMicro())
	for i := range rows {
		b.appendContext(&rows[i], ingestTS)
	}
}

// appendContext appends the context tail of one row.
func (b *RecordBuilder) appendContext(r *Change, ingestTS arrow.Timestamp) {
	b.op.AppendString(r.Op.String())
	if r.Pos != b.lastPos || b.posText == nil {
		b.lastPos = r.Pos
		b.posText, _ = r.Pos.AppendText(b.posText[:0])
		b.snapText = AppendLSN(b.snapText[:0], r.Pos.LSN)
	}
	b.pos.BinaryBuilder.Append(b.posText)
	if r.Op == OpSnapshot || r.CommitTS.IsZero() {
		b.commitTS.AppendNull()
	} else {
		b.commitTS.Append(arrow.Timestamp(r.CommitTS.UnixMicro()))
	}
	b.ingestTS.Append(ingestTS)
	if r.Op == OpSnapshot {
		b.snap.BinaryBuilder.Append(b.snapText)
	} else {
		b.snap.AppendNull()
	}
	b.phase.AppendString(string(PhaseOf(r.Op)))
}

// reset drops whatever a failed build appended.
func (b *RecordBuilder) reset() {
	for _, f := range b.rb.Fields() {
		f.NewArray().Release()
	}
}

// newColumnEncoder returns the encoder of a column on its builder.
func newColumnEncoder(ct colType, bld array.Builder) encoder {
	if !ct.list {
		return newScalarEncoder(ct.elem, bld)
	}
	lb := bld.(*array.ListBuilder)
	elem := newScalarEncoder(ct.elem, lb.ValueBuilder())
	var p arrayParser
	return encoder{
		kind: ct.elem.kind,
		appendValue: func(v []byte) error {
			if err := p.parse(v); err != nil {
				return err
			}
			lb.Append(true)
			for k, e := range p.elems {
				if e.null {
					elem.appendNull()
					continue
				}
				if err := elem.appendValue(p.buf[e.start:e.end]); err != nil {
					return elementError(k, p.buf[e.start:e.end], err)
				}
			}
			return nil
		},
		appendNull: lb.AppendNull,
	}
}

// elementError adds the element's index and text to the reason of a conversion error.
func elementError(k int, v []byte, err error) error {
	ce := &convError{kind: ErrMalformedValue, reason: err.Error()}
	var c *convError
	if errors.As(err, &c) {
		*ce = *c
	}
	ce.reason = fmt.Sprintf("array element %d %q: %s", k+1, shorten(v), ce.reason)
	return ce
}

// newScalarEncoder returns the encoder of a scalar type on its builder.
func newScalarEncoder(st scalarType, bld array.Builder) encoder {
	e := encoder{kind: st.kind, appendNull: bld.AppendNull, appendBinary: binaryAppender(st, bld)}
	switch st.kind {
	case kindBool:
		bb := bld.(*array.BooleanBuilder)
		e.appendValue = func(v []byte) error {
			x, err := parseBool(v)
			bb.Append(x)
			return err
		}
	case kindInt16, kindInt32, kindInt64, kindOID:
		e.appendValue = intAppender(st.kind, bld)
	case kindFloat32:
		fb := bld.(*array.Float32Builder)
		e.appendValue = func(v []byte) error {
			x, err := parseFloat(v, 32)
			fb.Append(float32(x))
			return err
		}
	case kindFloat64:
		fb := bld.(*array.Float64Builder)
		e.appendValue = func(v []byte) error {
			x, err := parseFloat(v, 64)
			fb.Append(x)
			return err
		}
	case kindDecimal:
		db := bld.(*array.Decimal128Builder)
		e.appendValue = func(v []byte) error {
			x, err := parseDecimal(v, st.precision, st.scale)
			db.Append(x)
			return err
		}
	case kindNumericText, kindText:
		sb := bld.(*array.StringBuilder)
		e.reserveData = sb.ReserveData
		e.appendValue = func(v []byte) error {
			sb.BinaryBuilder.Append(v)
			return nil
		}
	case kindBytea:
		bb := bld.(*array.BinaryBuilder)
		var scratch []byte
		e.reserveData = func(n int) { bb.ReserveData(n / 2) }
		e.appendValue = func(v []byte) error {
			var err error
			scratch, err = parseBytea(scratch[:0], v)
			bb.Append(scratch)
			return err
		}
	default:
		e.appendValue = temporalAppender(st.kind, bld)
	}
	return e
}

// intAppender returns the appendValue of an integer column.
func intAppender(k kind, bld array.Builder) func([]byte) error {
	switch k {
	case kindInt16:
		ib := bld.(*array.Int16Builder)
		return func(v []byte) error {
			x, err := parseInt(v, 16)
			ib.Append(int16(x))
			return err
		}
	case kindInt32:
		ib := bld.(*array.Int32Builder)
		return func(v []byte) error {
			x, err := parseInt(v, 32)
			ib.Append(int32(x))
			return err
		}
	case kindOID:
		ib := bld.(*array.Int64Builder)
		return func(v []byte) error {
			x, err := parseOID(v)
			ib.Append(x)
			return err
		}
	}
	ib := bld.(*array.Int64Builder)
	return func(v []byte) error {
		x, err := parseInt(v, 64)
		ib.Append(x)
		return err
	}
}

// temporalAppender returns the appendValue of date, time, timestamp(tz), interval and uuid
// columns.
func temporalAppender(k kind, bld array.Builder) func([]byte) error {
	switch k {
	case kindDate:
		db := bld.(*array.Date32Builder)
		return func(v []byte) error {
			x, err := parseDate(v)
			db.Append(x)
			return err
		}
	case kindTime:
		tb := bld.(*array.Time64Builder)
		return func(v []byte) error {
			x, err := parseTime(v)
			tb.Append(x)
			return err
		}
	case kindTimestamp, kindTimestamptz:
		tb := bld.(*array.TimestampBuilder)
		tz := k == kindTimestamptz
		return func(v []byte) error {
			x, err := parseTimestamp(v, tz)
			tb.Append(x)
			return err
		}
	case kindInterval:
		ib := bld.(*array.MonthDayNanoIntervalBuilder)
		return func(v []byte) error {
			x, err := parseInterval(v)
			ib.Append(x)
			return err
		}
	case kindUUID:
		ub := bld.(*extensions.UUIDBuilder)
		return func(v []byte) error {
			x, err := parseUUID(v)
			ub.AppendBytes(x)
			return err
		}
	}
	panic(fmt.Sprintf("batch: no encoder for kind %d", k))
}
