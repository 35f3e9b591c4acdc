package source

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicecdc/sluice/batch"
)

// ColumnRename is a column renamed in place (ALTER TABLE ... RENAME COLUMN Old TO New): its
// values in every existing row moved to the new name, which the WAL never shows.
type ColumnRename struct {
	Old, New string
}

// catalogAttr is one pg_attribute row of a table (attnum > 0), dropped columns included.
type catalogAttr struct {
	Num     int16
	Name    string
	Dropped bool
}

// attributes reads the attributes of relation rel in attnum order, dropped ones included.
func (r *typeResolver) attributes(ctx context.Context, rel uint32) ([]catalogAttr, error) {
	rows, err := r.q.Query(ctx, `SELECT attnum, attname::text, attisdropped FROM pg_catalog.pg_attribute
		WHERE attrelid = $1 AND attnum > 0 ORDER BY attnum`, rel)
	if err != nil {
		return nil, fmt.Errorf("reading the attributes of relation %d: %w", rel, err)
	}
	defer rows.Close()
	var out []catalogAttr
	for rows.Next() {
		var a catalogAttr
		if err := rows.Scan(&a.Num, &a.Name, &a.Dropped); err != nil {
			return nil, fmt.Errorf("reading the attributes of relation %d: %w", rel, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the attributes of relation %d: %w", rel, err)
	}
	return out, nil
}

// attnums maps the live column names of attrs to their attnum.
func attnums(attrs []catalogAttr) map[string]int16 {
	m := make(map[string]int16, len(attrs))
	for _, a := range attrs {
		if !a.Dropped {
			m[a.Name] = a.Num
		}
	}
	return m
}

// columnAttnums is the part of all (attnums) that names a column of s.
func columnAttnums(all map[string]int16, s batch.Schema) map[string]int16 {
	out := make(map[string]int16, len(s.Columns))
	for _, c := range s.Columns {
		if n, ok := all[c.Name]; ok {
			out[c.Name] = n
		}
	}
	return out
}

// anchors maps each column of cols named in changed to the nearest column before it that is not
// in changed ("" when none): where it sits among the columns both schemas share.
func anchors(cols []batch.Column, changed []string) map[string]string {
	out := map[string]string{}
	prev := ""
	for _, c := range cols {
		if slices.Contains(changed, c.Name) {
			out[c.Name] = prev
			continue
		}
		prev = c.Name
	}
	return out
}

// renames finds the columns of ev that were renamed rather than dropped and added. pgoutput
// names columns but does not number them, so a RENAME COLUMN arrives as one column gone and one
// new at the same place with the same type. Such a pair is a rename unless the catalog says
// otherwise: the old column's attnum (in was: read at the table's previous RELATION of the run,
// or recorded with the schema the run started from) is the new one's; without one, a column
// dropped and another added lands after every column (the highest attnum) with the dropped
// one's slot left before it (which a rename of the last column right after a drop before it
// also shows: only the recorded attnum tells those apart). A pair the catalog cannot decide is taken as a rename:
// stopping on a drop and add loses nothing, following a rename as one would diverge silently.
// It removes the renamed columns from ev.Added and ev.Dropped.
func renames(ev *SchemaEvent, was map[string]int16, attrs []catalogAttr) []ColumnRename {
	if ev.Old == nil || len(ev.Added) == 0 || len(ev.Dropped) == 0 {
		return nil
	}
	oldAt, newAt := anchors(ev.Old.Columns, ev.Dropped), anchors(ev.New.Columns, ev.Added)
	now := attnums(attrs)
	var out []ColumnRename
	used := map[string]bool{}
	for _, a := range ev.Dropped {
		oc := ev.Old.Columns[slices.IndexFunc(ev.Old.Columns, func(c batch.Column) bool { return c.Name == a })]
		for _, b := range ev.Added {
			nc := ev.New.Columns[slices.IndexFunc(ev.New.Columns, func(c batch.Column) bool { return c.Name == b })]
			if used[b] || oldAt[a] != newAt[b] || oc.TypeOID != nc.TypeOID {
				continue
			}
			if n, ok := was[a]; ok && now[b] != 0 && n != now[b] {
				continue // another column: a has its own attnum
			}
			if _, ok := was[a]; !ok && droppedThenAdded(attrs, newAt[b], b, ev.Added) {
				continue
			}
			used[b] = true
			out = append(out, ColumnRename{Old: a, New: b})
			break
		}
	}
	for _, r := range out { // the column keeps what was known of it (key, NOT NULL)
		oc := ev.Old.Columns[slices.IndexFunc(ev.Old.Columns, func(c batch.Column) bool { return c.Name == r.Old })]
		i := slices.IndexFunc(ev.New.Columns, func(c batch.Column) bool { return c.Name == r.New })
		ev.New.Columns[i].Key, ev.New.Columns[i].NotNull = oc.Key, oc.NotNull
	}
	if len(out) > 0 {
		ev.Added = slices.DeleteFunc(ev.Added, func(n string) bool { return used[n] })
		ev.Dropped = slices.DeleteFunc(ev.Dropped, func(n string) bool {
			return slices.ContainsFunc(out, func(r ColumnRename) bool { return r.Old == n })
		})
	}
	return out
}

// droppedThenAdded reports whether the catalog shows column b added after a column was dropped
// behind anchor: no live column older than b's addition (not in added) lies between anchor and b,
// and a dropped slot does.
func droppedThenAdded(attrs []catalogAttr, anchor, b string, added []string) bool {
	now := attnums(attrs)
	nb, ok := now[b]
	if !ok {
		return false
	}
	na := now[anchor] // 0 when anchor is "" or gone
	gap := false
	for _, a := range attrs {
		if a.Num <= na || a.Num >= nb {
			continue
		}
		if !a.Dropped {
			if slices.Contains(added, a.Name) {
				continue
			}
			return false // a live column between anchor and b: b took a slot in the middle
		}
		gap = true
	}
	return gap
}

// reAdded names the columns of s, other than those in skip, whose attnum now (the catalog's)
// differs from the one was recorded: each was dropped and added again under the same name since.
// A column that either map lacks is not judged.
func reAdded(s batch.Schema, was, now map[string]int16, skip []string) []string {
	var out []string
	for _, c := range s.Columns {
		w, ok1 := was[c.Name]
		n, ok2 := now[c.Name]
		if ok1 && ok2 && w != n && !slices.Contains(skip, c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}
