package source

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
)

// typeInfo is what the Arrow mapping needs to know about a column's type beyond its OID.
type typeInfo struct {
	BaseOID      uint32 // the type itself, or a domain's base type (through nested domains)
	Category     string // pg_type.typcategory of the base type
	ElemOID      uint32 // for arrays: the element type (a domain element resolved to its base)
	ElemCategory string // for arrays: the element type's category
}

// querier is the part of *pgx.Conn the catalog lookups use.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// typeResolver looks types up in pg_type and caches them. Type OIDs never change meaning while
// the type exists, so the cache is never invalidated. It is not safe for concurrent use.
type typeResolver struct {
	q     querier
	cache map[uint32]typeInfo
	names map[[2]int64]string
}

func newTypeResolver(q querier) *typeResolver {
	return &typeResolver{q: q, cache: map[uint32]typeInfo{}, names: map[[2]int64]string{}}
}

// baseType follows domains down to their base type and returns it with its category and element
// type.
func (r *typeResolver) baseType(ctx context.Context, oid uint32) (uint32, string, uint32, error) {
	for depth := 0; depth < 32; depth++ {
		var (
			typtype, category string
			base, elem        uint32
		)
		err := r.q.QueryRow(ctx,
			`SELECT typtype::text, typbasetype, typcategory::text, typelem FROM pg_catalog.pg_type WHERE oid = $1`,
			oid).Scan(&typtype, &base, &category, &elem)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, "", 0, fmt.Errorf("looking up type %d: no such type (dropped?)", oid)
		}
		if err != nil {
			return 0, "", 0, fmt.Errorf("looking up type %d: %w", oid, err)
		}
		if typtype != "d" {
			return oid, category, elem, nil
		}
		oid = base
	}
	return 0, "", 0, fmt.Errorf("looking up type %d: domains nested too deeply", oid)
}

// info returns the type facts of oid, from the cache when known.
func (r *typeResolver) info(ctx context.Context, oid uint32) (typeInfo, error) {
	if ti, ok := r.cache[oid]; ok {
		return ti, nil
	}
	base, category, elem, err := r.baseType(ctx, oid)
	if err != nil {
		return typeInfo{}, err
	}
	ti := typeInfo{BaseOID: base, Category: category}
	if category == "A" && elem != 0 {
		eb, ec, _, err := r.baseType(ctx, elem)
		if err != nil {
			return typeInfo{}, err
		}
		ti.ElemOID, ti.ElemCategory = eb, ec
	}
	r.cache[oid] = ti
	return ti, nil
}

// name returns format_type(oid, typmod).
func (r *typeResolver) name(ctx context.Context, oid uint32, typmod int32) (string, error) {
	k := [2]int64{int64(oid), int64(typmod)}
	if n, ok := r.names[k]; ok {
		return n, nil
	}
	var n string
	if err := r.q.QueryRow(ctx, `SELECT pg_catalog.format_type($1, $2)`, oid, typmod).Scan(&n); err != nil {
		return "", fmt.Errorf("formatting type %d: %w", oid, err)
	}
	r.names[k] = n
	return n, nil
}

// column builds a batch.Column for an attribute of type oid with typmod, declared with dims
// array dimensions (pg_attribute.attndims).
func (r *typeResolver) column(ctx context.Context, name string, oid uint32, typmod int32, dims int) (batch.Column, error) {
	ti, err := r.info(ctx, oid)
	if err != nil {
		return batch.Column{}, fmt.Errorf("column %s: %w", name, err)
	}
	tn, err := r.name(ctx, oid, typmod)
	if err != nil {
		return batch.Column{}, fmt.Errorf("column %s: %w", name, err)
	}
	return batch.Column{
		Name:         name,
		TypeOID:      ti.BaseOID,
		TypeName:     tn,
		TypeMod:      typmod,
		Category:     ti.Category,
		ElemOID:      ti.ElemOID,
		ElemCategory: ti.ElemCategory,
		Dims:         dims,
	}, nil
}

// relColumn is column for attribute name of relation rel as a RELATION message describes it
// (which does not carry the declared array dimensions): for an array type, attndims is read
// from the catalog.
func (r *typeResolver) relColumn(ctx context.Context, rel uint32, name string, oid uint32, typmod int32) (batch.Column, error) {
	ti, err := r.info(ctx, oid)
	if err != nil {
		return batch.Column{}, fmt.Errorf("column %s: %w", name, err)
	}
	dims := 0
	if ti.Category == "A" {
		err := r.q.QueryRow(ctx, `SELECT attndims FROM pg_catalog.pg_attribute WHERE attrelid = $1 AND attname = $2 AND NOT attisdropped`,
			rel, name).Scan(&dims)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) { // dropped since: the declared dimensions no longer matter
			return batch.Column{}, fmt.Errorf("column %s: reading its array dimensions: %w", name, err)
		}
	}
	return r.column(ctx, name, oid, typmod, dims)
}

// tableInfo is what the catalog says about one table: its columns and its identity.
type tableInfo struct {
	Name     batch.TableName
	Exists   bool
	Kind     string // pg_class.relkind
	Identity string // pg_class.relreplident: d (default), n (nothing), f (full), i (index)
	Columns  []attr // in attnum order; dropped and generated columns excluded
	PK       []string
	IdentIdx []string // the columns of the replica identity index when Identity is i
	// Unique are the unique indexes that make rows unique by their columns (uniqueIndexes).
	Unique  []uniqueIndex
	Tuples  float64 // pg_class.reltuples: an estimate, -1 when never analyzed
	CanRead bool    // SELECT privilege
	IsOwner bool    // the current role is (a member of) the owner
	// Ancestors are the partitioned tables t is a partition of, nearest first; PartKey is the
	// partition key's columns of a partitioned table ("" for an expression). See partition.go.
	Ancestors []batch.TableName
	PartKey   []string
}

// attr is one column as pg_attribute holds it.
type attr struct {
	Name    string
	TypeOID uint32
	TypeMod int32
	NotNull bool
	Dims    int // attndims
}

func (t tableInfo) hasColumn(name string) (attr, bool) {
	for _, a := range t.Columns {
		if a.Name == name {
			return a, true
		}
	}
	return attr{}, false
}

// readTable reads the catalog facts of one table. A table that does not exist gives Exists false
// and no error.
func readTable(ctx context.Context, q querier, name batch.TableName) (tableInfo, error) {
	ti := tableInfo{Name: name}
	var oid uint32
	err := q.QueryRow(ctx, `
SELECT c.oid, c.relkind::text, c.relreplident::text, c.reltuples::float8,
       has_table_privilege(c.oid, 'SELECT'), pg_has_role(c.relowner, 'USAGE')
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2`, name.Schema, name.Name).
		Scan(&oid, &ti.Kind, &ti.Identity, &ti.Tuples, &ti.CanRead, &ti.IsOwner)
	if errors.Is(err, pgx.ErrNoRows) {
		return ti, nil
	}
	if err != nil {
		return ti, fmt.Errorf("reading catalog of table %s: %w", name, err)
	}
	ti.Exists = true
	rows, err := q.Query(ctx, `
SELECT attname, atttypid, atttypmod, attnotnull, attndims FROM pg_catalog.pg_attribute
WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
ORDER BY attnum`, oid)
	if err != nil {
		return ti, fmt.Errorf("reading columns of table %s: %w", name, err)
	}
	ti.Columns, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (attr, error) {
		var a attr
		err := r.Scan(&a.Name, &a.TypeOID, &a.TypeMod, &a.NotNull, &a.Dims)
		return a, err
	})
	if err != nil {
		return ti, fmt.Errorf("reading columns of table %s: %w", name, err)
	}
	if ti.PK, err = indexColumns(ctx, q, oid, "indisprimary"); err != nil {
		return ti, fmt.Errorf("reading primary key of table %s: %w", name, err)
	}
	if ti.IdentIdx, err = indexColumns(ctx, q, oid, "indisreplident"); err != nil {
		return ti, fmt.Errorf("reading replica identity index of table %s: %w", name, err)
	}
	if ti.Unique, err = uniqueIndexes(ctx, q, oid); err != nil {
		return ti, fmt.Errorf("reading the unique indexes of table %s: %w", name, err)
	}
	if err := readPartitioning(ctx, q, oid, &ti); err != nil {
		return ti, err
	}
	return ti, nil
}

// indexColumns returns the columns, in index order, of the table's index flagged by flag
// (indisprimary or indisreplident); nil when there is none.
func indexColumns(ctx context.Context, q querier, rel uint32, flag string) ([]string, error) {
	rows, err := q.Query(ctx, `
SELECT a.attname FROM pg_catalog.pg_index i
CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = $1 AND i.`+flag+`
ORDER BY k.ord`, rel)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// uniqueIndex is a unique index of a table, as uniqueIndexes reads it.
type uniqueIndex struct {
	Name    string
	Columns []string // its key columns, in index order (INCLUDE columns left out)
	// NullsNotDistinct: NULLS NOT DISTINCT (Postgres 15+), so two rows with NULL in the same
	// column clash too.
	NullsNotDistinct bool
}

// uniqueIndexes returns the unique indexes of relation rel that prove its rows unique by their
// key columns: valid (not a CREATE INDEX CONCURRENTLY that failed), on columns only (no
// expression) and not partial (no WHERE). The primary key is one of them.
func uniqueIndexes(ctx context.Context, q querier, rel uint32) ([]uniqueIndex, error) {
	rows, err := q.Query(ctx, `
SELECT ci.relname::text,
       coalesce((to_jsonb(i) ->> 'indnullsnotdistinct')::bool, false),
       ARRAY(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE k.ord <= i.indnkeyatts ORDER BY k.ord)
FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ci ON ci.oid = i.indexrelid
WHERE i.indrelid = $1 AND i.indisunique AND i.indisvalid AND i.indexprs IS NULL AND i.indpred IS NULL
ORDER BY i.indisprimary DESC, ci.relname`, rel)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (uniqueIndex, error) {
		var u uniqueIndex
		err := r.Scan(&u.Name, &u.NullsNotDistinct, &u.Columns)
		return u, err
	})
}

// keyColumns decides the key of a table: the configured key, or the primary key.
func keyColumns(t tableInfo, configured []string) []string {
	if len(configured) > 0 {
		return configured
	}
	return t.PK
}

// buildSchema turns catalog facts into the batch.Schema of the table, marking key columns.
func buildSchema(ctx context.Context, r *typeResolver, t tableInfo, key []string) (batch.Schema, error) {
	s := batch.Schema{Table: t.Name, Columns: make([]batch.Column, 0, len(t.Columns))}
	for _, a := range t.Columns {
		c, err := r.column(ctx, a.Name, a.TypeOID, a.TypeMod, a.Dims)
		if err != nil {
			return batch.Schema{}, fmt.Errorf("table %s: %w", t.Name, err)
		}
		c.NotNull = a.NotNull
		c.Key = slices.Contains(key, a.Name)
		s.Columns = append(s.Columns, c)
	}
	return s, nil
}

// DiscoverSchema reads the schema of one table from the catalog of the database conn is
// connected to: columns in attnum order (dropped and generated columns excluded, as pgoutput
// does; only the published ones when tc has a column list: tc.Columns or tc.ExcludeColumns),
// their types resolved through domains, and the key (tc.Key, or the primary key when it is
// empty). It returns a permanent error when the table does not exist or has no key.
func DiscoverSchema(ctx context.Context, conn *pgx.Conn, tc TableConfig) (batch.Schema, error) {
	table := tc.Table
	ti, err := readTable(ctx, conn, table)
	if err != nil {
		return batch.Schema{}, err
	}
	if !ti.Exists {
		return batch.Schema{}, failure.Permanentf("table %s does not exist: create it or remove it from the pipeline's tables", table)
	}
	k := keyColumns(ti, tc.Key)
	if len(k) == 0 {
		return batch.Schema{}, failure.Permanentf("table %s has no primary key: add one, or name a key for it in the pipeline config", table)
	}
	for _, name := range k {
		if _, ok := ti.hasColumn(name); !ok {
			return batch.Schema{}, failure.Permanentf("table %s has no column %q named in its key: fix the key in the pipeline config", table, name)
		}
	}
	ti.Columns = publishedColumns(ti.Columns, tc)
	return buildSchema(ctx, newTypeResolver(conn), ti, k)
}
