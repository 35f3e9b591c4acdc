package wire

import (
	"bytes"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
)

// ChunkBytes is the size of the Arrow IPC pieces of an Apply stream: well under gRPC's default
// 4 MiB message limit, large enough that framing costs nothing.
const ChunkBytes = 1 << 20

// SendRecord writes rec as one Arrow IPC stream (schema, then the record batch) and hands it to
// send in pieces of at most ChunkBytes, in order. A nil rec sends nothing.
func SendRecord(rec arrow.RecordBatch, send func([]byte) error) error {
	if rec == nil {
		return nil
	}
	cw := &chunkWriter{send: send}
	w := ipc.NewWriter(cw, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		return fmt.Errorf("encoding the batch as Arrow IPC: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("encoding the batch as Arrow IPC: %w", err)
	}
	return cw.flush()
}

// chunkWriter cuts what is written into pieces of ChunkBytes for send.
type chunkWriter struct {
	buf  bytes.Buffer
	send func([]byte) error
	err  error
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.buf.Write(p)
	for c.buf.Len() >= ChunkBytes && c.err == nil {
		c.err = c.send(bytes.Clone(c.buf.Next(ChunkBytes)))
	}
	return len(p), c.err
}

func (c *chunkWriter) flush() error {
	if c.err == nil && c.buf.Len() > 0 {
		c.err = c.send(bytes.Clone(c.buf.Bytes()))
		c.buf.Reset()
	}
	return c.err
}

// ReadRecord reads the record of an Apply stream whose pieces next returns (io.EOF after the
// last). A stream without pieces (the end of a snapshot) gives an empty record of spec's
// columns and the context columns. More than one record batch is an error: the worker sends
// one. The caller releases the record.
func ReadRecord(mem memory.Allocator, schema batch.Schema, next func() ([]byte, error)) (arrow.RecordBatch, error) {
	r := &piecesReader{next: next}
	if _, err := r.peek(); err == io.EOF {
		s, err := batch.ArrowSchema(schema)
		if err != nil {
			return nil, fmt.Errorf("building the empty record of %s: %w", schema.Table, err)
		}
		return array.NewRecordBatch(s, emptyColumns(mem, s), 0), nil
	} else if err != nil {
		return nil, err
	}
	rd, err := ipc.NewReader(r, ipc.WithAllocator(mem))
	if err != nil {
		return nil, fmt.Errorf("reading the batch's Arrow IPC stream: %w", err)
	}
	defer rd.Release()
	var rec arrow.RecordBatch
	for rd.Next() {
		if rec != nil {
			rec.Release()
			return nil, fmt.Errorf("the batch's Arrow IPC stream holds more than one record batch; send one")
		}
		rec = rd.RecordBatch()
		rec.Retain()
	}
	if err := rd.Err(); err != nil {
		if rec != nil {
			rec.Release()
		}
		return nil, fmt.Errorf("reading the batch's Arrow IPC stream: %w", err)
	}
	if rec == nil {
		return nil, fmt.Errorf("the batch's Arrow IPC stream holds no record batch")
	}
	return rec, nil
}

func emptyColumns(mem memory.Allocator, s *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, s.NumFields())
	for i, f := range s.Fields() {
		b := array.NewBuilder(mem, f.Type)
		cols[i] = b.NewArray()
		b.Release()
	}
	return cols
}

// piecesReader is an io.Reader over the pieces next returns.
type piecesReader struct {
	next func() ([]byte, error)
	cur  []byte
	err  error
}

func (r *piecesReader) peek() ([]byte, error) {
	for len(r.cur) == 0 && r.err == nil {
		r.cur, r.err = r.next()
	}
	if len(r.cur) > 0 {
		return r.cur, nil
	}
	return nil, r.err
}

func (r *piecesReader) Read(p []byte) (int, error) {
	if _, err := r.peek(); err != nil {
		return 0, err
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}
