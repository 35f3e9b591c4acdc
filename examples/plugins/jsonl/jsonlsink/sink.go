// Package jsonlsink is the sink of the JSON Lines example plugin: each target is a directory of
// local files, a schema.json and a log.jsonl of upserts and deletes by key, appended per batch
// and read back by replaying it (the last line of a key wins). The sink keeps no position: the
// worker's position store (sinks/plugin/positionstore) keeps it, so a batch may be applied again
// after a crash between this sink's write and the store's; replaying the same lines leaves the
// same rows, which is the idempotency by key the store relies on.
package jsonlsink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// The files of one target's directory.
const (
	SchemaFile = "schema.json"
	LogFile    = "log.jsonl"
)

// Line is one line of a target's log: an upsert of a row or a delete of a key.
type Line struct {
	Op  string                     `json:"op"`  // OpUpsert or OpDelete
	Key []json.RawMessage          `json:"key"` // the key columns' values, in schema order
	Pos string                     `json:"pos"` // the row's source position (batch.Position)
	Row map[string]json.RawMessage `json:"row,omitempty"`
}

// The operations of a Line.
const (
	OpUpsert = "upsert"
	OpDelete = "delete"
)

var targetRe = regexp.MustCompile(`^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$`)

// Sink writes targets as JSON Lines files under one root directory. It is safe for concurrent
// use; the calls for one target take turns.
type Sink struct {
	root string

	mu     sync.Mutex
	tables map[string]*sync.Mutex // per target
}

// New returns a sink writing under root (created when missing).
func New(root string) (*Sink, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("creating the jsonl root directory %s: %w", root, err)
	}
	return &Sink{root: root, tables: map[string]*sync.Mutex{}}, nil
}

// Dir returns the directory of target under root, or a poison error for a target name that is
// not a dotted name of letters, digits and _ (so a name never leaves root).
func Dir(root, target string) (string, error) {
	if !targetRe.MatchString(target) {
		return "", sinks.Poisonf("jsonl target %q: use a dotted name of letters, digits and _", target)
	}
	return filepath.Join(root, target), nil
}

// lock takes target's turn and returns its directory and the function that ends the turn.
func (s *Sink) lock(target string) (string, func(), error) {
	dir, err := Dir(s.root, target)
	if err != nil {
		return "", nil, err
	}
	s.mu.Lock()
	m := s.tables[target]
	if m == nil {
		m = &sync.Mutex{}
		s.tables[target] = m
	}
	s.mu.Unlock()
	m.Lock()
	return dir, m.Unlock, nil
}

// EnsureTable creates target's directory and writes its schema. A change of the key columns is
// poison: the log's lines are keyed by the old ones. Added columns need nothing (rows are JSON).
func (s *Sink) EnsureTable(ctx context.Context, spec sinks.TableSpec) error {
	dir, unlock, err := s.lock(spec.Target)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("table %s: creating %s: %w", spec.Schema.Table, dir, err)
	}
	if old, err := os.ReadFile(filepath.Join(dir, SchemaFile)); err == nil {
		var prev sinks.TableSpec
		if err := json.Unmarshal(old, &prev); err != nil {
			return sinks.Poisonf("table %s: reading %s: %v; remove the target's directory and resync the table", spec.Schema.Table, filepath.Join(dir, SchemaFile), err)
		}
		if !slices.Equal(keyNames(prev.Schema), keyNames(spec.Schema)) {
			return sinks.Poisonf("table %s: target %s is keyed by %v, the table now by %v; resync the table into a new target",
				spec.Schema.Table, spec.Target, keyNames(prev.Schema), keyNames(spec.Schema))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("table %s: reading its schema: %w", spec.Schema.Table, err)
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("table %s: encoding its schema: %w", spec.Schema.Table, err)
	}
	return writeFileAtomic(filepath.Join(dir, SchemaFile), data)
}

func keyNames(s batch.Schema) []string {
	var out []string
	for _, c := range s.Columns {
		if c.Key {
			out = append(out, c.Name)
		}
	}
	return out
}

// Position reports no position: this sink has no position capability.
func (s *Sink) Position(context.Context, sinks.TableSpec) (batch.SourcePosition, bool, error) {
	return batch.SourcePosition{}, false, nil
}

// Apply appends b's rows to the target's log, one line per row (deletes carry the key only),
// and syncs the file before returning: an acknowledged batch is on disk. A crash mid-append
// leaves a partial last line, which the next Apply cuts off and which reading ignores; the
// batch is then replayed whole (its position was not stored). An empty batch writes nothing.
func (s *Sink) Apply(ctx context.Context, b sinks.Batch) error {
	if b.Record == nil || b.Record.NumRows() == 0 {
		return nil
	}
	lines, err := encode(b)
	if err != nil {
		return err
	}
	dir, unlock, err := s.lock(b.Spec.Target)
	if err != nil {
		return err
	}
	defer unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := openLog(filepath.Join(dir, LogFile))
	if err != nil {
		return fmt.Errorf("table %s: opening its log: %w", b.Spec.Schema.Table, err)
	}
	defer f.Close()
	if _, err := f.Write(lines); err != nil {
		return fmt.Errorf("table %s: appending %d rows: %w", b.Spec.Schema.Table, b.Record.NumRows(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("table %s: syncing its log: %w", b.Spec.Schema.Table, err)
	}
	return f.Close()
}

// openLog opens path for appending, creating it, after cutting off a partial last line (a
// crash mid-append).
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	keep, err := completeLength(f)
	if err == nil {
		err = f.Truncate(keep)
	}
	if err == nil {
		_, err = f.Seek(keep, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// completeLength returns the length of f up to and including its last newline.
func completeLength(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// encode returns b's rows as log lines.
func encode(b sinks.Batch) ([]byte, error) {
	rec := b.Record
	numData := int(rec.NumCols()) - batch.NumContextColumns
	if numData != len(b.Spec.Schema.Columns) {
		return nil, sinks.Poisonf("table %s: batch has %d data columns, the table %d", b.Spec.Schema.Table, numData, len(b.Spec.Schema.Columns))
	}
	opIdx, _ := batch.ContextIndex(numData, batch.ColOp)
	ops, ok := rec.Column(opIdx).(*array.String)
	if !ok {
		return nil, sinks.Poisonf("table %s: column %s is %s, want utf8", b.Spec.Schema.Table, batch.ColOp, rec.Column(opIdx).DataType())
	}
	pos, err := batch.RowPositions(rec)
	if err != nil {
		return nil, sinks.Poisonf("table %s: %v", b.Spec.Schema.Table, err)
	}
	type out struct {
		name string
		col  arrow.Array
	}
	var cols []out
	for i := range numData {
		cols = append(cols, out{rec.Schema().Field(i).Name, rec.Column(i)})
	}
	for _, m := range b.Spec.Metadata {
		name, ok := batch.ContextColumn(m.From)
		idx, ok2 := batch.ContextIndex(numData, name)
		if !ok || !ok2 {
			return nil, sinks.Poisonf("table %s: unknown metadata column %q", b.Spec.Schema.Table, m.From)
		}
		cols = append(cols, out{m.As, rec.Column(idx)})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for r := range int(rec.NumRows()) {
		l := Line{Op: OpUpsert, Pos: pos[r].String()}
		deleted := ops.Value(r) == batch.OpDelete.String()
		if deleted {
			l.Op = OpDelete
		} else {
			l.Row = make(map[string]json.RawMessage, len(cols))
		}
		for i, c := range cols {
			v, err := value(c.col, r)
			if err != nil {
				return nil, sinks.Poisonf("table %s: column %s: %v", b.Spec.Schema.Table, c.name, err)
			}
			if i < numData && b.Spec.Schema.Columns[i].Key {
				l.Key = append(l.Key, v)
			}
			if !deleted {
				l.Row[c.name] = v
			}
		}
		if err := enc.Encode(l); err != nil {
			return nil, fmt.Errorf("table %s: encoding a row: %w", b.Spec.Schema.Table, err)
		}
	}
	return buf.Bytes(), nil
}

// value is the JSON form of row r of col.
func value(col arrow.Array, r int) (json.RawMessage, error) {
	if col.IsNull(r) {
		return json.RawMessage("null"), nil
	}
	if d, ok := col.(*array.Decimal128); ok { // a JSON number with the column's scale: 88.00, not 88
		return json.RawMessage(d.Value(r).ToString(d.DataType().(*arrow.Decimal128Type).Scale)), nil
	}
	return json.Marshal(col.GetOneForMarshal(r))
}

// DiscardSnapshot removes the target's directory. It is idempotent.
func (s *Sink) DiscardSnapshot(ctx context.Context, spec sinks.TableSpec) error {
	dir, unlock, err := s.lock(spec.Target)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("table %s: removing %s: %w", spec.Schema.Table, dir, err)
	}
	return nil
}

// Maintain rewrites the target's log with one line per visible row, dropping replaced images
// and deletes: the rows read back are the same.
func (s *Sink) Maintain(ctx context.Context, spec sinks.TableSpec) (sinks.MaintenanceReport, error) {
	dir, unlock, err := s.lock(spec.Target)
	if err != nil {
		return nil, err
	}
	defer unlock()
	path := filepath.Join(dir, LogFile)
	rows, lines, err := replay(path)
	if err != nil {
		return nil, fmt.Errorf("table %s: reading its log: %w", spec.Schema.Table, err)
	}
	if lines == len(rows) {
		return sinks.MaintenanceReport{}, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, k := range sortedKeys(rows) {
		if err := enc.Encode(rows[k]); err != nil {
			return nil, err
		}
	}
	if err := writeFileAtomic(path, buf.Bytes()); err != nil {
		return nil, fmt.Errorf("table %s: rewriting its log: %w", spec.Schema.Table, err)
	}
	return sinks.MaintenanceReport{"dropped_lines": int64(lines - len(rows))}, nil
}

// Close releases nothing: every call opens and closes its files.
func (s *Sink) Close(context.Context) error { return nil }

// ReadTable returns the visible rows of target under root by key (the key columns' JSON values
// as a JSON array), as a reader of the files sees them; a target without files has none.
func ReadTable(root, target string) (map[string]Line, error) {
	dir, err := Dir(root, target)
	if err != nil {
		return nil, err
	}
	rows, _, err := replay(filepath.Join(dir, LogFile))
	return rows, err
}

// replay reads the log at path: the last upsert of each key not deleted after it, and the
// number of complete lines. A partial last line (a crash mid-append) is ignored.
func replay(path string) (map[string]Line, int, error) {
	rows := map[string]Line{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return rows, 0, nil
	} else if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	n := 0
	for {
		raw, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return rows, n, nil // raw, if any, is a partial line
		} else if err != nil {
			return nil, 0, err
		}
		n++
		var l Line
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, 0, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		k, err := json.Marshal(l.Key)
		if err != nil {
			return nil, 0, err
		}
		if l.Op == OpDelete {
			delete(rows, string(k))
		} else {
			rows[string(k)] = l
		}
	}
}

func sortedKeys(m map[string]Line) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// writeFileAtomic replaces path with data: a reader sees the old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
