package source

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sluicecdc/sluice/batch"
)

// attnumsQuery lists the live columns of table $1.$2 with their attnum.
const attnumsQuery = `SELECT a.attname, a.attnum FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped`

// Attnums returns the attnum of every column of s that table s.Table has now (a column it no
// longer has is left out; an empty map when the table is gone). A caller that records them with
// s gives them to a later stream (StreamOptions.Attnums): a rename keeps a column's attnum, a drop
// and an add do not, which at a run's first RELATION is the only way to tell the two apart.
func (f *Fetcher) Attnums(ctx context.Context, s batch.Schema) (map[string]int16, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return nil, fmt.Errorf("reading the attnums of table %s: fetcher is closed", s.Table)
	}
	rr := f.conn.ExecParams(ctx, attnumsQuery, [][]byte{[]byte(s.Table.Schema), []byte(s.Table.Name)}, nil, nil, nil)
	all := map[string]int16{}
	var bad error
	for rr.NextRow() {
		v := rr.Values()
		n, err := strconv.ParseInt(string(v[1]), 10, 16)
		if err != nil {
			bad = err
			continue
		}
		all[string(v[0])] = int16(n)
	}
	if _, err := rr.Close(); err != nil {
		return nil, fmt.Errorf("reading the attnums of table %s: %w", s.Table, err)
	}
	if bad != nil {
		return nil, fmt.Errorf("reading the attnums of table %s: %w", s.Table, bad)
	}
	return columnAttnums(all, s), nil
}
