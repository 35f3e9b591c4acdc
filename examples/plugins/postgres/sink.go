package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// positionsTable holds one row per target: its committed position, or null lsn for none.
const positionsTable = "sluice_plugin_positions"

// sink writes targets of one Postgres database. Every Apply is one transaction that locks the
// target's position row first, so the guard (batch.Covered on the position it read) and the
// write are one atomic step: a stale attempt waits for the newer one and then skips.
type sink struct {
	pool *pgxpool.Pool
}

var _ sinks.Sink = (*sink)(nil)

func open(ctx context.Context, dsn string) (*sink, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting to the target database: %w", err)
	}
	_, err = pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+positionsTable+` (
		target text PRIMARY KEY, system_id text, timeline int, slot text, lsn pg_lsn, seq bigint)`)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("creating %s in the target database: %w", positionsTable, err)
	}
	return &sink{pool: pool}, nil
}

func (s *sink) health(ctx context.Context) error { return s.pool.Ping(ctx) }

var targetRe = regexp.MustCompile(`^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$`)

// table is the quoted schema.table of a target.
func table(target string) (string, error) {
	if !targetRe.MatchString(target) {
		return "", sinks.Poisonf("target %q is not table or schema.table in lower-case letters, digits and _; change tables[].target", target)
	}
	schema, name, ok := strings.Cut(target, ".")
	if !ok {
		schema, name = "public", target
	}
	return pgx.Identifier{schema, name}.Sanitize(), nil
}

// classify marks the Postgres errors that retrying cannot fix as poison: data exceptions (class
// 22), integrity violations (23), syntax and access rule violations (42: an unknown type or
// column). Others (connections, serialization failures) stay transient.
func classify(err error, doing string) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23") || strings.HasPrefix(pe.Code, "42")) {
		return sinks.Poison(fmt.Errorf("%s: %w", doing, err))
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// columns are the target's columns: the source's, then the materialized context columns.
type column struct{ name, typ string }

func columns(spec sinks.TableSpec) ([]column, error) {
	var out []column
	for _, c := range spec.Schema.Columns {
		out = append(out, column{c.Name, c.TypeName})
	}
	for _, m := range spec.Metadata {
		typ := "text"
		switch m.From {
		case batch.MetaCommitTS, batch.MetaIngestTS:
			typ = "timestamptz"
		case batch.MetaOp, batch.MetaPos, batch.MetaSnapshot, batch.MetaPhase:
		default:
			return nil, sinks.Poisonf("metadata %q of target %s is not a context column; use one of %v", m.From, spec.Target, batch.MetadataNames())
		}
		out = append(out, column{m.As, typ})
	}
	return out, nil
}

func (s *sink) EnsureTable(ctx context.Context, spec sinks.TableSpec) error {
	tbl, err := table(spec.Target)
	if err != nil {
		return err
	}
	cols, err := columns(spec)
	if err != nil {
		return err
	}
	var defs, keys []string
	for _, c := range cols {
		defs = append(defs, pgx.Identifier{c.name}.Sanitize()+" "+c.typ)
	}
	for _, i := range spec.Schema.KeyIndexes() {
		keys = append(keys, pgx.Identifier{spec.Schema.Columns[i].Name}.Sanitize())
	}
	if len(keys) == 0 {
		return sinks.Poisonf("table %s has no key: set tables[].key", spec.Schema.Table)
	}
	stmt := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s, PRIMARY KEY (%s))", tbl, strings.Join(defs, ", "), strings.Join(keys, ", "))
	if _, err := s.pool.Exec(ctx, stmt); err != nil {
		return classify(err, "creating target "+spec.Target)
	}
	for _, d := range defs { // columns the source gained
		if _, err := s.pool.Exec(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s", tbl, d)); err != nil {
			return classify(err, "adding a column to target "+spec.Target)
		}
	}
	return nil
}

func (s *sink) Position(ctx context.Context, spec sinks.TableSpec) (batch.SourcePosition, bool, error) {
	return readPosition(ctx, s.pool, spec.Target, "")
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readPosition reads the committed position of target; suffix FOR UPDATE locks its row.
func readPosition(ctx context.Context, q querier, target, suffix string) (batch.SourcePosition, bool, error) {
	var (
		sys, slot, lsn *string
		tl             *int32
		seq            *int64
	)
	err := q.QueryRow(ctx, `SELECT system_id, timeline, slot, lsn::text, seq FROM `+positionsTable+` WHERE target = $1 `+suffix, target).
		Scan(&sys, &tl, &slot, &lsn, &seq)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && lsn == nil) {
		return batch.SourcePosition{}, false, nil
	}
	if err != nil {
		return batch.SourcePosition{}, false, fmt.Errorf("reading the position of target %s: %w", target, err)
	}
	pos, err := batch.ParsePosition(fmt.Sprintf("%s:%d", *lsn, *seq))
	if err != nil {
		return batch.SourcePosition{}, false, fmt.Errorf("reading the position of target %s: %w", target, err)
	}
	return batch.SourcePosition{Source: batch.SourceID{SystemID: *sys, Timeline: *tl, Slot: *slot}, Position: pos}, true, nil
}

func (s *sink) Apply(ctx context.Context, b sinks.Batch) error {
	tbl, err := table(b.Spec.Target)
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("applying to target %s: %w", b.Spec.Target, err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	// Lock the target's position row (created empty on first use): concurrent attempts of the
	// same table queue here.
	if _, err := tx.Exec(ctx, `INSERT INTO `+positionsTable+` (target) VALUES ($1) ON CONFLICT DO NOTHING`, b.Spec.Target); err != nil {
		return fmt.Errorf("applying to target %s: %w", b.Spec.Target, err)
	}
	committed, ok, err := readPosition(ctx, tx, b.Spec.Target, "FOR UPDATE")
	if err != nil {
		return err
	}
	cover, err := batch.Covered(committed, ok, b.Phase, b.Lo, b.Hi)
	if err != nil {
		return sinks.Poison(fmt.Errorf("target %s: %w", b.Spec.Target, err))
	}
	rec := b.Record
	switch cover {
	case batch.CoverAll:
		return nil // a replay: the target holds it already
	case batch.CoverPart:
		trimmed, _, err := batch.DropCovered(memory.DefaultAllocator, rec, committed.Position)
		if err != nil {
			return fmt.Errorf("trimming the batch of target %s: %w", b.Spec.Target, err)
		}
		defer trimmed.Release()
		rec = trimmed
	}
	if rec != nil && rec.NumRows() > 0 {
		if err := writeRows(ctx, tx, tbl, b.Spec, rec); err != nil {
			return err
		}
	}
	if !b.Hi.Position.IsZero() { // a snapshot chunk (zero Hi) leaves the position as it was
		_, err := tx.Exec(ctx, `UPDATE `+positionsTable+` SET system_id = $2, timeline = $3, slot = $4, lsn = $5::text::pg_lsn, seq = $6 WHERE target = $1`,
			b.Spec.Target, b.Hi.Source.SystemID, b.Hi.Source.Timeline, b.Hi.Source.Slot, string(batch.AppendLSN(nil, b.Hi.Position.LSN)), int64(b.Hi.Position.Seq))
		if err != nil {
			return classify(err, "writing the position of target "+b.Spec.Target)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return classify(err, "committing to target "+b.Spec.Target)
	}
	return nil
}

// writeRows queues one upsert or delete per row of rec in tx. Values travel as their Postgres
// text and are cast to the column's type by the server.
func writeRows(ctx context.Context, tx pgx.Tx, tbl string, spec sinks.TableSpec, rec arrow.RecordBatch) error {
	cols, err := columns(spec)
	if err != nil {
		return err
	}
	nData := len(spec.Schema.Columns)
	src := make([]int, len(cols)) // the record column of each target column
	for i := range nData {
		src[i] = i
	}
	for j, m := range spec.Metadata {
		name, _ := batch.ContextColumn(m.From)
		k, ok := batch.ContextIndex(nData, name)
		if !ok {
			return sinks.Poisonf("target %s: no context column %s in the batch", spec.Target, name)
		}
		src[nData+j] = k
	}
	keyIdx := spec.Schema.KeyIndexes()
	var names, params, sets, keyNames, where []string
	for i, c := range cols {
		n := pgx.Identifier{c.name}.Sanitize()
		names = append(names, n)
		params = append(params, fmt.Sprintf("$%d::text::%s", i+1, c.typ))
		sets = append(sets, n+" = EXCLUDED."+n)
	}
	for j, i := range keyIdx {
		n := pgx.Identifier{cols[i].name}.Sanitize()
		keyNames = append(keyNames, n)
		where = append(where, fmt.Sprintf("%s = $%d::text::%s", n, j+1, cols[i].typ))
	}
	upsert := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s", tbl,
		strings.Join(names, ", "), strings.Join(params, ", "), strings.Join(keyNames, ", "), strings.Join(sets, ", "))
	del := fmt.Sprintf("DELETE FROM %s WHERE %s", tbl, strings.Join(where, " AND "))
	ops, ok := rec.Column(nData).(*array.String)
	if !ok {
		return sinks.Poisonf("target %s: the batch's __op column is not utf8", spec.Target)
	}
	var q pgx.Batch
	for r := range int(rec.NumRows()) {
		if ops.Value(r) == batch.OpDelete.String() {
			args := make([]any, len(keyIdx))
			for j, i := range keyIdx {
				args[j] = textValue(rec.Column(i), r)
			}
			q.Queue(del, args...)
			continue
		}
		args := make([]any, len(cols))
		for i := range cols {
			args[i] = textValue(rec.Column(src[i]), r)
		}
		q.Queue(upsert, args...)
	}
	if err := tx.SendBatch(ctx, &q).Close(); err != nil {
		return classify(err, "writing rows of target "+spec.Target)
	}
	return nil
}

func (s *sink) DiscardSnapshot(ctx context.Context, spec sinks.TableSpec) error {
	tbl, err := table(spec.Target)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", tbl).Scan(&exists); err != nil {
			return fmt.Errorf("discarding the snapshot of target %s: %w", spec.Target, err)
		}
		if exists {
			if _, err := tx.Exec(ctx, "TRUNCATE "+tbl); err != nil {
				return classify(err, "discarding the snapshot of target "+spec.Target)
			}
		}
		_, err := tx.Exec(ctx, `DELETE FROM `+positionsTable+` WHERE target = $1`, spec.Target)
		return classify(err, "discarding the position of target "+spec.Target)
	})
}

func (s *sink) Close(context.Context) error {
	s.pool.Close()
	return nil
}
