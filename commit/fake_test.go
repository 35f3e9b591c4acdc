package commit

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/staging"
)

var testSource = batch.SourceID{SystemID: "7312345678901234567", Timeline: 1, Slot: "sluice_p1"}

func sp(lsn uint64, seq uint32) batch.SourcePosition {
	return batch.SourcePosition{Source: testSource, Position: batch.Position{LSN: lsn, Seq: seq}}
}

var testSpec = sinks.TableSpec{Target: "raw.orders", Schema: batch.Schema{
	Table: batch.TableName{Schema: "shop", Name: "orders"},
	Columns: []batch.Column{
		{Name: "id", TypeOID: 20, TypeName: "bigint", Key: true, NotNull: true},
		{Name: "note", TypeOID: 25, TypeName: "text"},
	},
}}

var testTable = Table{Pipeline: "p1", Spec: testSpec, Sink: SinkRef{Name: "lake"}}

func ptr[T any](v T) *T { return &v }

// fakeSink is an in-test sinks.Sink: it holds a committed position, records every Apply as rows
// "op id note @lsn" with its lo and hi, and the columns EnsureTable was asked for. Each call can
// be scripted by a function field given the call's number (from 1, per method), so a test can
// fail the Nth call or change the position under the engine; a nil field, or one returning nil,
// lets the call do its default. A record with a key twice is an error: a sink may rely on each
// key appearing once.
type fakeSink struct {
	onPosition func(n int, s *fakeSink) error // runs with the sink locked; may set pos
	onApply    func(n int) error
	onEnsure   func(n int) error

	mu                         sync.Mutex
	pos                        batch.SourcePosition
	hasPos                     bool
	applies                    []fakeApply
	ensured                    [][]batch.Column
	positions, applied, ensure int // calls so far
}

type fakeApply struct {
	rows   []string
	lo, hi uint64
}

// failNth returns a script that fails call number at with err and lets every other call pass.
func failNth(at int, err error) func(int) error {
	return func(n int) error {
		if n == at {
			return err
		}
		return nil
	}
}

func (s *fakeSink) EnsureTable(_ context.Context, spec sinks.TableSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensure++
	if s.onEnsure != nil {
		if err := s.onEnsure(s.ensure); err != nil {
			return err
		}
	}
	s.ensured = append(s.ensured, spec.Schema.Columns)
	return nil
}

func (s *fakeSink) Position(context.Context, sinks.TableSpec) (batch.SourcePosition, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.positions++
	if s.onPosition != nil {
		if err := s.onPosition(s.positions, s); err != nil {
			return batch.SourcePosition{}, false, err
		}
	}
	return s.pos, s.hasPos, nil
}

func (s *fakeSink) Apply(_ context.Context, b sinks.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied++
	if s.onApply != nil {
		if err := s.onApply(s.applied); err != nil {
			return err
		}
	}
	pos, err := batch.RowPositions(b.Record)
	if err != nil {
		return err
	}
	n := len(b.Spec.Schema.Columns)
	op, _ := batch.ContextIndex(n, batch.ColOp)
	a := fakeApply{lo: b.Lo.Position.LSN, hi: b.Hi.Position.LSN}
	seen := map[string]bool{}
	for i := range int(b.Record.NumRows()) {
		id := b.Record.Column(0).ValueStr(i)
		if seen[id] {
			return fmt.Errorf("key %s appears twice in one batch", id)
		}
		seen[id] = true
		note := "∅"
		if !b.Record.Column(1).IsNull(i) {
			note = b.Record.Column(1).ValueStr(i)
		}
		a.rows = append(a.rows, fmt.Sprintf("%s %s %s @%d", b.Record.Column(op).ValueStr(i), id, note, pos[i].LSN))
	}
	s.applies = append(s.applies, a)
	s.pos, s.hasPos = b.Hi, true
	return nil
}

func (s *fakeSink) DiscardSnapshot(context.Context, sinks.TableSpec) error { return nil }
func (s *fakeSink) Close(context.Context) error                            { return nil }

// change is a change of the test table: key id, note (NULL when ""), at LSN lsn.
func change(op batch.Op, lsn uint64, id int, note string) batch.Change {
	v := []batch.Value{{Text: fmt.Append(nil, id)}, {Text: []byte(note)}}
	if note == "" {
		v[1] = batch.Value{Null: true}
	}
	return batch.Change{Op: op, Pos: batch.Position{LSN: lsn}, CommitTS: time.Unix(1_800_000_000, 0).UTC(), Values: v}
}

// stageBatch stages rows as a stream batch [lo, hi] whose file says it was read with cols (the
// test table's columns when nil, and then the header does not name them).
func stageBatch(t *testing.T, st *staging.Store, lo, hi uint64, cols []batch.Column, rows ...batch.Change) staging.BatchRef {
	t.Helper()
	schema := testSpec.Schema
	if cols != nil {
		schema.Columns = cols
		for i := range rows {
			for len(rows[i].Values) < len(cols) {
				rows[i].Values = append(rows[i].Values, batch.Value{Text: []byte("x")})
			}
		}
	}
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	rec, err := rb.Build(rows, time.Unix(1_800_000_001, 0).UTC())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var buf bytes.Buffer
	h := batch.FileHeader{Table: schema.Table, Lo: sp(lo, 0), Hi: sp(hi, 0), Phase: batch.PhaseStream, Columns: cols}
	if err := batch.WriteFile(&buf, rec, h, batch.CompressionNone); err != nil {
		t.Fatal(err)
	}
	return put(t, st, h.Lo, h.Hi, int64(len(rows)), &buf)
}

// put stages data as the file of a stream batch [lo, hi] of rows rows of the test table.
func put(t *testing.T, st *staging.Store, lo, hi batch.SourcePosition, rows int64, data *bytes.Buffer) staging.BatchRef {
	t.Helper()
	ref, err := st.Put(context.Background(), staging.BatchRef{Pipeline: "p1", Table: testSpec.Schema.Table, Lo: lo, Hi: hi,
		Rows: rows, Phase: batch.PhaseStream}, data)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
