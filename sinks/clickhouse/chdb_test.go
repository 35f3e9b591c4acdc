package clickhouse

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"
	chcolumn "github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"

	"github.com/sluicecdc/sluice/testkit/testenv"
)

// chdbConn carries the sink's statements to a chdb session (ClickHouse 26.7 in process, which
// speaks no native protocol) in place of the driver's connection. It is a transport, not a
// model of ClickHouse: every statement goes to the engine as the sink wrote it, and an INSERT's
// block is built by the driver's own column code (lib/proto.Block, the block the driver sends
// on the wire) from the slices the sink appends, then encoded as FORMAT Native (the same block
// encoding, without the protocol's block info) and read by the engine with FROM INFILE. Only
// the methods the sink calls are implemented; the embedded nil Conn panics on any other.
type chdbConn struct {
	driver.Conn
	s *testenv.ChDBSession

	mu      sync.Mutex // one statement at a time on the session
	inserts int        // names the Native files
	// statements logs what the sink ran, in order, with INSERTs as the file they read.
	statements []string
}

func newChdbConn(s *testenv.ChDBSession) *chdbConn { return &chdbConn{s: s} }

// codeRE finds the exception code in the engine's message ("Code: 60. DB::Exception: ...").
var codeRE = regexp.MustCompile(`Code: (\d+)\.`)

// exception turns the engine's message into the driver's exception, as the native protocol
// would deliver it, so the sink's classification by code runs unchanged.
func exception(err error) error {
	var ce *testenv.ChDBError
	if !errors.As(err, &ce) {
		return err
	}
	m := codeRE.FindStringSubmatch(ce.Message)
	if m == nil {
		return err
	}
	code, _ := strconv.Atoi(m[1])
	return &clickhouse.Exception{Code: int32(code), Message: ce.Message}
}

// bind substitutes the sink's ? placeholders with quoted string literals (the sink binds only
// database and table names).
func bind(q string, args []any) (string, error) {
	for _, a := range args {
		s, ok := a.(string)
		if !ok || !strings.Contains(q, "?") {
			return "", fmt.Errorf("chdbConn: cannot bind %T %v into %s", a, a, q)
		}
		q = strings.Replace(q, "?", "'"+strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)+"'", 1)
	}
	return q, nil
}

func (c *chdbConn) rows(q string, args []any) ([][]any, error) {
	q, err := bind(q, args)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.statements = append(c.statements, q)
	rows, err := c.s.Rows(q)
	return rows, exception(err)
}

func (c *chdbConn) Exec(_ context.Context, q string, args ...any) error {
	_, err := c.rows(q, args)
	return err
}

func (c *chdbConn) Query(_ context.Context, q string, args ...any) (driver.Rows, error) {
	rows, err := c.rows(q, args)
	if err != nil {
		return nil, err
	}
	return &chdbRows{rows: rows, next: -1}, nil
}

func (c *chdbConn) QueryRow(_ context.Context, q string, args ...any) driver.Row {
	rows, err := c.rows(q, args)
	return &chdbRow{rows: rows, err: err}
}

func (c *chdbConn) Close() error { return nil }

// insertRE parses the sink's INSERT statement (layout.insertSQL).
var insertRE = regexp.MustCompile("^INSERT INTO `([^`]+)`\\.`([^`]+)` \\((.*)\\)$")

// PrepareBatch builds the block of the sink's INSERT with the column types the engine reports
// for the table, as the server's block header does.
func (c *chdbConn) PrepareBatch(_ context.Context, q string, _ ...driver.PrepareBatchOption) (driver.Batch, error) {
	m := insertRE.FindStringSubmatch(q)
	if m == nil {
		return nil, fmt.Errorf("chdbConn: %q is not an INSERT INTO `db`.`table` (columns)", q)
	}
	types, err := c.rows("SELECT name, type FROM system.columns WHERE database = ? AND table = ?", []any{m[1], m[2]})
	if err != nil {
		return nil, err
	}
	typeOf := map[string]string{}
	for _, r := range types {
		typeOf[r[0].(string)] = r[1].(string)
	}
	block := proto.NewBlock()
	for _, quoted := range strings.Split(m[3], ", ") {
		name := strings.Trim(quoted, "`")
		typ, ok := typeOf[name]
		if !ok {
			return nil, &clickhouse.Exception{Code: 16, Message: fmt.Sprintf("no column %s in %s.%s", name, m[1], m[2])}
		}
		if err := block.AddColumn(name, chcolumn.Type(typ)); err != nil {
			return nil, fmt.Errorf("chdbConn: column %s %s: %w", name, typ, err)
		}
	}
	return &chdbBatch{c: c, insert: q, block: block}, nil
}

// chdbBatch is one INSERT's block.
type chdbBatch struct {
	driver.Batch
	c      *chdbConn
	insert string
	block  *proto.Block
}

type chdbColumn struct{ col chcolumn.Interface }

func (c chdbColumn) Append(v any) error {
	_, err := c.col.Append(v)
	return err
}

func (c chdbColumn) AppendRow(v any) error { return c.col.AppendRow(v) }

func (b *chdbBatch) Column(i int) driver.BatchColumn { return chdbColumn{b.block.Columns[i]} }
func (b *chdbBatch) Columns() []chcolumn.Interface   { return b.block.Columns }
func (b *chdbBatch) Abort() error                    { return nil }
func (b *chdbBatch) Append(...any) error {
	return errors.New("chdbConn: row appends are not used by the sink")
}
func (b *chdbBatch) Flush() error { return errors.New("chdbConn: Flush is not used by the sink") }
func (b *chdbBatch) Rows() int    { return b.block.Rows() }
func (b *chdbBatch) IsSent() bool { return false }
func (b *chdbBatch) Close() error { return nil }
func (b *chdbBatch) AppendStruct(any) error {
	return errors.New("chdbConn: AppendStruct is not used by the sink")
}

// Send writes the block as FORMAT Native and has the engine insert it with the sink's statement.
func (b *chdbBatch) Send() error {
	var buf chproto.Buffer
	if err := b.block.Encode(&buf, 0); err != nil {
		return fmt.Errorf("chdbConn: encoding the block of %s: %w", b.insert, err)
	}
	b.c.mu.Lock()
	b.c.inserts++
	path := filepath.Join(b.c.s.Dir(), fmt.Sprintf("insert-%03d.native", b.c.inserts))
	b.c.mu.Unlock()
	if err := os.WriteFile(path, buf.Buf, 0o644); err != nil {
		return err
	}
	_, err := b.c.rows(b.insert+" FROM INFILE '"+path+"' FORMAT Native", nil)
	return err
}

// chdbRows are the rows of one query, as JSON values in SELECT order.
type chdbRows struct {
	driver.Rows
	rows [][]any
	next int
}

func (r *chdbRows) Next() bool {
	r.next++
	return r.next < len(r.rows)
}
func (r *chdbRows) Scan(dest ...any) error { return scanInto(r.rows[r.next], dest) }
func (r *chdbRows) Err() error             { return nil }
func (r *chdbRows) Close() error           { return nil }

// chdbRow is the first row of one query.
type chdbRow struct {
	driver.Row
	rows [][]any
	err  error
}

func (r *chdbRow) Err() error { return r.err }
func (r *chdbRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if len(r.rows) == 0 {
		return sql.ErrNoRows
	}
	return scanInto(r.rows[0], dest)
}

// scanInto converts the JSON values of one row into the sink's destinations.
func scanInto(row []any, dest []any) error {
	if len(row) != len(dest) {
		return fmt.Errorf("chdbConn: %d values into %d destinations", len(row), len(dest))
	}
	for i, v := range row {
		text := fmt.Sprint(v)
		switch d := dest[i].(type) {
		case *string:
			*d = text
		case *uint64:
			n, err := strconv.ParseUint(text, 10, 64)
			if err != nil {
				return fmt.Errorf("chdbConn: value %d: %w", i, err)
			}
			*d = n
		default:
			return fmt.Errorf("chdbConn: cannot scan into %T", d)
		}
	}
	return nil
}
