package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/testkit/devstack"
)

// ChDBVersion is the npm chdb package the Iceberg interop tests read tables with: ClickHouse
// 26.7 embedded in a Node.js module, an Iceberg reader that shares no code with iceberg-go.
const ChDBVersion = "3.4.0"

// ChDB is an installed chdb package, run through node.
type ChDB struct {
	nodePath string // its node_modules directory
}

// chdbScript runs the query in argv[1] and prints the result; an error goes to stderr with exit
// status 1.
const chdbScript = `try { process.stdout.write(require('chdb').query(process.argv[1], 'JSONEachRow')) }
catch (e) { process.stderr.write(String(e && e.message || e)); process.exit(1) }`

// NewChDB returns chdb, installing it with npm into the shared cache ($SLUICE_CACHE, like the
// other tools of the stack) on first use; later calls take no time. It needs node and npm
// (scripts/install-tools.sh installs Debian's).
func NewChDB(t testing.TB) ChDB {
	t.Helper()
	dir := filepath.Join(devstack.DefaultCache(), "chdb-"+ChDBVersion)
	mod := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(mod, "chdb", "package.json")); err == nil {
		return ChDB{nodePath: mod}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := installChDB(ctx, dir); err != nil {
		t.Fatalf("testenv: installing npm chdb@%s into %s: %v", ChDBVersion, dir, err)
	}
	return ChDB{nodePath: mod}
}

// installChDB installs chdb into dir unless another process did while this one waited for the
// lock; the install happens in a temporary directory renamed into place, so a killed install
// leaves nothing that looks complete.
func installChDB(ctx context.Context, dir string) error {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed: run scripts/install-tools.sh debian (Debian's nodejs and npm)", tool)
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // released on close anyway
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "chdb", "package.json")); err == nil {
		return nil
	}
	tmp := dir + ".tmp-" + strconv.Itoa(os.Getpid())
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, args := range [][]string{{"init", "-y"}, {"install", "--no-audit", "--no-fund", "chdb@" + ChDBVersion}} {
		cmd := exec.CommandContext(ctx, "npm", args...)
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm %v: %w\n%s", args, err, out)
		}
	}
	return os.Rename(tmp, dir)
}

// Query runs sql in chdb with dir as the working directory (icebergLocal paths are relative to
// it) and returns the rows, numbers as json.Number. 64-bit integers come as numbers, not strings.
func (c ChDB) Query(ctx context.Context, dir, sql string) ([]map[string]any, error) {
	cmd := exec.CommandContext(ctx, "node", "-e", chdbScript, sql+" SETTINGS output_format_json_quote_64bit_integers = 0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+c.nodePath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("chdb: %s: %w: %s", sql, err, stderr.String())
	}
	var rows []map[string]any
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	for {
		var row map[string]any
		err := dec.Decode(&row)
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("chdb: decoding the result of %s: %w", sql, err)
		}
		rows = append(rows, row)
	}
}

// IcebergLocal reads the Iceberg table whose location is the local directory table (absolute,
// or a file:// URL) with chdb's icebergLocal, which applies position and equality deletes, and
// returns the rows of columns (a SELECT list).
func (c ChDB) IcebergLocal(ctx context.Context, table, columns string) ([]map[string]any, error) {
	table = strings.TrimPrefix(table, "file://")
	// icebergLocal takes a path relative to the working directory.
	return c.Query(ctx, filepath.Dir(table), fmt.Sprintf("SELECT %s FROM icebergLocal('%s')", columns, filepath.Base(table)))
}

// chdbSessionScript runs one chdb Session on the directory in argv[1]: it reads one JSON object
// a line from stdin, {"sql": a statement, "format": its output format}, and answers each with
// one JSON line, {"out": the output} or {"err": the engine's message}.
const chdbSessionScript = `const { Session } = require('chdb');
const s = new Session(process.argv[1]);
const rl = require('readline').createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const q = JSON.parse(line);
  let r;
  try { r = { out: s.query(q.sql, q.format) } } catch (e) { r = { err: String(e && e.message || e) } }
  process.stdout.write(JSON.stringify(r) + '\n');
});
rl.on('close', () => { s.cleanup && s.cleanup(); });`

// ChDBSession is one chdb Session kept open in a node process: databases, tables and their rows
// persist across its statements, as on a server. Statements run one at a time; it is not safe
// for concurrent use.
type ChDBSession struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *json.Decoder
	dir string
}

// Session starts a chdb Session whose data lives in a fresh directory under t.TempDir(); the
// test's cleanup ends it.
func (c ChDB) Session(t testing.TB) *ChDBSession {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("node", "-e", chdbSessionScript, filepath.Join(dir, "data"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+c.nodePath)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("testenv: chdb session: %v", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("testenv: chdb session: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: starting a chdb session in node: %v", err)
	}
	s := &ChDBSession{cmd: cmd, in: in, out: json.NewDecoder(out), dir: dir}
	t.Cleanup(func() {
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("testenv: chdb session ended with %v", err)
		}
	})
	return s
}

// Dir is a directory of the session's own, for files the statements read (file(...) paths
// are relative to it).
func (s *ChDBSession) Dir() string { return s.dir }

// ChDBError is the message of a statement chdb refused.
type ChDBError struct {
	SQL, Message string
}

func (e *ChDBError) Error() string { return fmt.Sprintf("chdb: %s: %s", e.SQL, e.Message) }

// Exec runs one statement and returns its rows as maps (JSONEachRow, numbers as json.Number).
// A statement the engine refuses returns a *ChDBError.
func (s *ChDBSession) Exec(sql string) ([]map[string]any, error) {
	var rows []map[string]any
	err := s.run(sql, "JSONEachRow", func(dec *json.Decoder) error {
		var row map[string]any
		err := dec.Decode(&row)
		if err == nil {
			rows = append(rows, row)
		}
		return err
	})
	return rows, err
}

// Rows runs one statement and returns its rows as lists of values in the order of its SELECT
// (JSONCompactEachRow, numbers as json.Number, 64-bit integers as strings).
func (s *ChDBSession) Rows(sql string) ([][]any, error) {
	var rows [][]any
	err := s.run(sql, "JSONCompactEachRow", func(dec *json.Decoder) error {
		var row []any
		err := dec.Decode(&row)
		if err == nil {
			rows = append(rows, row)
		}
		return err
	})
	return rows, err
}

// run sends sql and hands a decoder of its output to row until the output ends.
func (s *ChDBSession) run(sql, format string, row func(*json.Decoder) error) error {
	line, err := json.Marshal(map[string]string{"sql": sql, "format": format})
	if err != nil {
		return err
	}
	if _, err := s.in.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("chdb session: sending %s: %w", sql, err)
	}
	var r struct {
		Out *string `json:"out"`
		Err *string `json:"err"`
	}
	if err := s.out.Decode(&r); err != nil {
		return fmt.Errorf("chdb session: reading the answer to %s: %w", sql, err)
	}
	if r.Err != nil {
		return &ChDBError{SQL: sql, Message: *r.Err}
	}
	if r.Out == nil {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(*r.Out))
	dec.UseNumber()
	for {
		err := row(dec)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("chdb: decoding the result of %s: %w", sql, err)
		}
	}
}
