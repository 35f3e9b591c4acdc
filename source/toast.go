package source

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
)

// maxLookupKeys bounds the keys of one lookup query (Postgres allows 65535 parameters).
const maxLookupKeys = 1000

// Fetcher fills unchanged TOAST values that neither the old tuple nor an earlier image of the
// same key could supply, by reading the row's current values from the source by key. See the
// package documentation for why that can neither lose nor resurrect data.
type Fetcher struct {
	mu   sync.Mutex
	conn *pgconn.PgConn
}

// OpenFetcher connects to the source for Fill.
func OpenFetcher(ctx context.Context, cfg Config) (*Fetcher, error) {
	cc, err := connConfig(cfg.DSN, false)
	if err != nil {
		return nil, err
	}
	conn, err := pgconn.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connecting to fetch unchanged TOAST values: %w", err)
	}
	return &Fetcher{conn: conn}, nil
}

// Close closes the connection. It is idempotent.
func (f *Fetcher) Close(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return nil
	}
	err := f.conn.Close(ctx)
	f.conn = nil
	return err
}

// NeedsFill reports whether a change still holds unchanged TOAST values.
func NeedsFill(c batch.Change) bool {
	if c.Op == batch.OpDelete {
		return false
	}
	for _, v := range c.Values {
		if v.Unchanged {
			return true
		}
	}
	return false
}

// Fill returns changes with every unchanged TOAST value replaced by the row's current value,
// read by key from the source, in arrival order. A change whose row no longer exists (a later
// delete, key change or truncate, still ahead in the stream, removed it) becomes a delete of its
// key, preceded by a delete of its OldKey when it changed the key: the later change in the
// stream then brings the table to its current state. Changes that need nothing are returned
// as they are. It is safe for concurrent use.
func (f *Fetcher) Fill(ctx context.Context, schema batch.Schema, changes []batch.Change) ([]batch.Change, error) {
	keys := schema.KeyIndexes()
	if len(keys) == 0 {
		return nil, failure.Permanentf("table %s has no key columns: unchanged TOAST values cannot be fetched", schema.Table)
	}
	var (
		need   []int // indexes of changes to fill
		cols   []int // columns to fetch
		colSet = map[int]bool{}
	)
	for i, c := range changes {
		if !NeedsFill(c) {
			continue
		}
		need = append(need, i)
		for j, v := range c.Values {
			if v.Unchanged && !colSet[j] {
				colSet[j] = true
				cols = append(cols, j)
			}
		}
	}
	if len(need) == 0 {
		return changes, nil
	}
	rows, err := f.fetch(ctx, schema, keys, cols, changes, need)
	if err != nil {
		return nil, err
	}
	out := make([]batch.Change, 0, len(changes))
	for _, c := range changes {
		if !NeedsFill(c) {
			out = append(out, c)
			continue
		}
		row, ok := rows[keyString(c.Values, keys)]
		if !ok {
			if c.OldKey != nil {
				out = append(out, batch.Change{Op: batch.OpDelete, Pos: c.Pos, CommitTS: c.CommitTS, Values: keyValues(c.OldKey, keys)})
			}
			out = append(out, batch.Change{Op: batch.OpDelete, Pos: c.Pos, CommitTS: c.CommitTS, Values: keyValues(c.Values, keys)})
			continue
		}
		vals := make([]batch.Value, len(c.Values))
		copy(vals, c.Values)
		for n, j := range cols {
			if vals[j].Unchanged {
				vals[j] = row[len(keys)+n]
			}
		}
		c.Values = vals
		out = append(out, c)
	}
	return out, nil
}

// fetch reads the key columns and cols of the rows whose keys the changes at need hold, and
// returns them by key string.
func (f *Fetcher) fetch(ctx context.Context, s batch.Schema, keys, cols []int, changes []batch.Change, need []int) (map[string][]batch.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return nil, fmt.Errorf("fetching unchanged TOAST values of table %s: fetcher is closed", s.Table)
	}
	rows := map[string][]batch.Value{}
	var (
		params [][]byte
		n      int
		queued = map[string]bool{}
	)
	flush := func() error {
		if n == 0 {
			return nil
		}
		rr := f.conn.ExecParams(ctx, lookupQuery(s, cols, n), params, nil, nil, nil)
		for rr.NextRow() {
			vals := copyRow(rr.Values())
			rows[keyString(vals, seq(len(keys)))] = vals
		}
		if _, err := rr.Close(); err != nil {
			return fmt.Errorf("fetching unchanged TOAST values of table %s: %w", s.Table, err)
		}
		params, n = params[:0], 0
		return nil
	}
	for _, i := range need {
		k := keyString(changes[i].Values, keys)
		if queued[k] {
			continue
		}
		queued[k] = true
		for _, j := range keys {
			params = append(params, changes[i].Values[j].Text)
		}
		if n++; n == maxLookupKeys {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return rows, nil
}

// keyString encodes the values at idx into a map key.
func keyString(vals []batch.Value, idx []int) string {
	var b strings.Builder
	for _, i := range idx {
		b.WriteString(strconv.Itoa(len(vals[i].Text)))
		b.WriteByte(':')
		b.Write(vals[i].Text)
	}
	return b.String()
}

// keyValues copies the key columns of vals; the other columns are NULL.
func keyValues(vals []batch.Value, keys []int) []batch.Value {
	out := make([]batch.Value, len(vals))
	for i := range out {
		out[i].Null = true
	}
	for _, k := range keys {
		out[k] = vals[k]
	}
	return out
}

// seq returns 0..n-1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
