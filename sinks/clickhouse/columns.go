package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicecdc/sluice/sinks"
)

// createdPrefix starts the comment of a target's ColMarker column, which records the source and
// metadata columns Sluice created in the table (JSON list of names after it). ClickHouse keeps
// no history of a table's columns; the record is how EnsureTable tells a column the source just
// added from one an operator dropped from the target (keepDropped).
const createdPrefix = "sluice created columns: "

// createdColumns reads the record of the columns Sluice created in l's table (nil when the
// table has none yet: created before the record existed).
func (s *Sink) createdColumns(ctx context.Context, l *layout) ([]string, error) {
	var comment string
	err := s.conn.QueryRow(ctx, "SELECT comment FROM system.columns WHERE database = ? AND table = ? AND name = ?",
		l.db, l.name, ColMarker).Scan(&comment)
	if err != nil {
		if isNoRows(err) {
			return nil, nil
		}
		return nil, classify(err, "table %s: reading the column record of %s.%s", l.source, l.db, l.name)
	}
	rest, ok := strings.CutPrefix(comment, createdPrefix)
	if !ok {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal([]byte(rest), &names); err != nil {
		return nil, fmt.Errorf("table %s: the column record of %s.%s (comment of %s) is not a JSON list: %w",
			l.source, l.db, l.name, ColMarker, err)
	}
	return names, nil
}

// recordColumns adds the source and metadata columns of l to the record (createdColumns) when
// it lacks one. Run after the columns exist: a column added but not yet recorded reads as one
// present, never as one dropped.
func (s *Sink) recordColumns(ctx context.Context, l *layout, had []string) error {
	names := slices.Clone(had)
	for _, c := range l.cols {
		if (c.role == roleData || c.role == roleMeta) && !slices.Contains(names, c.name) {
			names = append(names, c.name)
		}
	}
	if had != nil && len(names) == len(had) {
		return nil
	}
	js, err := json.Marshal(names)
	if err != nil {
		return fmt.Errorf("table %s: encoding the column record: %w", l.source, err)
	}
	q := fmt.Sprintf("ALTER TABLE %s COMMENT COLUMN %s %s", l.qualified(), quote(ColMarker), literal(createdPrefix+string(js)))
	return classify(s.conn.Exec(ctx, q), "table %s: recording the columns of %s.%s", l.source, l.db, l.name)
}

// keepDropped removes from add the columns Sluice created before (had, createdColumns) while
// the table holds a committed position: an operator dropped or renamed them, and adding them
// back would leave them NULL in every row written before without a word. The next batch then
// stops the table naming the column (sinks.ColumnDroppedByHand). A table without a position
// (new, or emptied for a backfill) gets them back.
func (s *Sink) keepDropped(ctx context.Context, l *layout, had []string, add []column) ([]column, error) {
	var gone []string
	for _, c := range add {
		if slices.Contains(had, c.name) {
			gone = append(gone, c.name)
		}
	}
	if len(gone) == 0 {
		return add, nil
	}
	if _, has, err := s.position(ctx, l.tableRef); err != nil || !has {
		return add, err
	}
	s.log.WarnContext(ctx, "columns dropped from the target outside Sluice are not added back while it holds rows; "+
		"the table stops at its next batch", "table", l.source, "target", l.db+"."+l.name, "columns", gone)
	return slices.DeleteFunc(add, func(c column) bool { return slices.Contains(gone, c.name) }), nil
}

// literal quotes s as a ClickHouse string literal.
func literal(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// droppedColumn returns sinks.ColumnDroppedByHand for the first source or metadata column of l
// that its table lacks, or err as classify marks it when none is missing (or the table cannot
// be read): an INSERT naming a column the table lost fails with only the server's message.
func (s *Sink) droppedColumn(ctx context.Context, l *layout, err error) error {
	wrapped := classify(err, "table %s: starting the insert into %s.%s", l.source, l.db, l.name)
	switch exceptionCode(err) {
	case 10, 16, 47: // NOT_FOUND_COLUMN_IN_BLOCK, NO_SUCH_COLUMN_IN_TABLE, UNKNOWN_IDENTIFIER
	default:
		return wrapped
	}
	e, ok, derr := s.describe(ctx, l.db, l.name)
	if derr != nil || !ok {
		return wrapped
	}
	for _, c := range l.cols {
		if _, found := e.columns[c.name]; !found && (c.role == roleData || c.role == roleMeta) {
			return sinks.ColumnDroppedByHand(l.source, l.db+"."+l.name, c.name)
		}
	}
	return wrapped
}
