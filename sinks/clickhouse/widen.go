package clickhouse

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
)

// widenable reports whether a ClickHouse column of type have becomes want with MODIFY COLUMN
// keeping every value: a wider integer, Float32 → Float64, a Decimal of the same scale and a
// higher precision, each alike inside Nullable. These are the sink's types of the Postgres
// widenings the reader follows (source.Widens).
func widenable(have, want string) bool {
	h, hn := strings.CutPrefix(have, "Nullable(")
	w, wn := strings.CutPrefix(want, "Nullable(")
	if hn != wn {
		return false
	}
	if hn {
		h, w = strings.TrimSuffix(h, ")"), strings.TrimSuffix(w, ")")
	}
	ints := map[string]int{"Int8": 1, "Int16": 2, "Int32": 3, "Int64": 4}
	switch {
	case ints[h] > 0 && ints[w] > ints[h]:
		return true
	case h == "Float32" && w == "Float64":
		return true
	}
	var hp, hs, wp, ws int
	if n, _ := fmt.Sscanf(h, "Decimal(%d, %d)", &hp, &hs); n != 2 {
		return false
	}
	if n, _ := fmt.Sscanf(w, "Decimal(%d, %d)", &wp, &ws); n != 2 {
		return false
	}
	return ws == hs && wp > hp
}

// widen changes the type of every source column of e that the layout widened (widenable) with
// ALTER TABLE ... MODIFY COLUMN, and records the new type in e. ClickHouse cannot change a
// sorting key column's type: a widened key column is poison naming the remedy. Idempotent: a
// column already widened is not altered again.
func (s *Sink) widen(ctx context.Context, l *layout, e *existing) error {
	for _, c := range l.cols {
		have, ok := e.columns[c.name]
		if !ok || have == c.typ || c.role != roleData || !widenable(have, c.typ) {
			continue
		}
		if c.key {
			return sinks.Poisonf("table %s: key column %s was widened in the source (%s → %s), but ClickHouse cannot "+
				"change the type of a sorting key column of %s.%s: drop the target and resync the table (sluice resync "+
				"--table %s)", l.source, c.name, have, c.typ, l.db, l.name, l.source)
		}
		q := fmt.Sprintf("ALTER TABLE %s MODIFY COLUMN %s %s", l.qualified(), quote(c.name), c.typ)
		if err := s.conn.Exec(ctx, q); err != nil {
			return classify(err, "table %s: widening column %s of %s.%s from %s to %s", l.source, c.name, l.db, l.name, have, c.typ)
		}
		s.log.InfoContext(ctx, "widened column", logkey.Table, l.source, logkey.Target, l.db+"."+l.name, logkey.Column, c.name, logkey.From, have, logkey.To, c.typ)
		e.columns[c.name] = c.typ
	}
	return nil
}
