package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
)

// Check runs the preflight checks of cfg against the source database and returns every problem
// found. An error means a check could not run (connection, permissions on the catalog); problems
// are what the operator must fix. It changes nothing in the database.
func Check(ctx context.Context, cfg Config) ([]Problem, error) {
	if err := cfg.Validate(); err != nil {
		return nil, failure.Permanent(err)
	}
	conn, err := connect(ctx, cfg.DSN)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return check(ctx, conn, cfg)
}

func check(ctx context.Context, conn *pgx.Conn, cfg Config) ([]Problem, error) {
	var problems []Problem
	add := func(ps ...Problem) { problems = append(problems, ps...) }

	ps, err := serverProblems(ctx, conn)
	if err != nil {
		return nil, err
	}
	add(ps...)
	pub, err := readPublication(ctx, conn, cfg.Publication)
	if err != nil {
		return nil, err
	}
	slot, err := readSlot(ctx, conn, cfg.Slot)
	if err != nil {
		return nil, err
	}
	owner, err := ownerProblems(ctx, conn, cfg)
	if err != nil {
		return nil, err
	}
	if len(owner) > 0 {
		add(owner...) // the slot's own problems would advise dropping another pipeline's slot
	} else {
		add(slotProblems(cfg, slot, pub)...)
	}
	resolver := newTypeResolver(conn)
	configured := map[batch.TableName]bool{}
	for _, tc := range cfg.Tables {
		configured[tc.Table] = true
	}
	for _, tc := range cfg.Tables {
		ti, err := readTable(ctx, conn, tc.Table)
		if err != nil {
			return nil, err
		}
		ps := tableProblems(ti, tc.Key)
		add(ps...)
		if !ti.Exists {
			continue
		}
		where, bad, err := normalizeWhere(ctx, conn, ti, tc)
		if err != nil {
			return nil, err
		}
		if bad != nil {
			ps = append(ps, *bad)
			add(*bad)
		}
		fps := append(filterProblems(ti, tc, where), partitionProblems(cfg.Publication, pub, ti, configured)...)
		add(fps...)
		add(publicationProblems(cfg.Publication, pub, ti)...)
		if bad == nil {
			add(publicationFilterProblems(cfg.Publication, pub, ti, tc, where)...)
		}
		if len(ps)+len(fps) > 0 {
			continue
		}
		ti.Columns = publishedColumns(ti.Columns, tc)
		s, err := buildSchema(ctx, resolver, ti, keyColumns(ti, tc.Key))
		if err != nil {
			return nil, err
		}
		checkType := cfg.CheckType
		if checkType == nil {
			checkType = arrowTypeCheck(s.Table)
		}
		add(typeProblems(s, checkType)...)
		if cfg.CheckTable != nil {
			if err := cfg.CheckTable(s); err != nil {
				subject := "table " + s.Table.String()
				add(Problem{Subject: subject, Message: strings.TrimPrefix(err.Error(), subject+": "), Fix: "change the table's destination settings in the config"})
			}
		}
	}
	return problems, nil
}

// serverProblems checks the server settings and the role's attributes.
func serverProblems(ctx context.Context, conn *pgx.Conn) ([]Problem, error) {
	var (
		walLevel           string
		slots, senders     int
		replication, super bool
	)
	err := conn.QueryRow(ctx, `
SELECT current_setting('wal_level'), current_setting('max_replication_slots')::int,
       current_setting('max_wal_senders')::int, r.rolreplication, r.rolsuper
FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`).Scan(&walLevel, &slots, &senders, &replication, &super)
	if err != nil {
		return nil, fmt.Errorf("reading server settings: %w", err)
	}
	var ps []Problem
	if walLevel != "logical" {
		ps = append(ps, Problem{Subject: "setting wal_level",
			Message: fmt.Sprintf("is %q, logical decoding needs logical", walLevel),
			Fix:     "set wal_level = logical in postgresql.conf (ALTER SYSTEM SET wal_level = logical) and restart the server"})
	}
	if slots < 1 {
		ps = append(ps, Problem{Subject: "setting max_replication_slots", Message: "is 0",
			Fix: "set max_replication_slots to at least 1 more than the slots in use and restart the server"})
	}
	if senders < 1 {
		ps = append(ps, Problem{Subject: "setting max_wal_senders", Message: "is 0",
			Fix: "set max_wal_senders to at least 2 more than the replication connections in use and restart the server"})
	}
	if !replication && !super {
		ps = append(ps, Problem{Subject: "role privileges", Message: "the connecting role has neither REPLICATION nor SUPERUSER",
			Fix: "ALTER ROLE <role> WITH REPLICATION"})
	}
	return ps, nil
}

// tableProblems checks that a table exists, can be read, and has a usable key that its replica
// identity carries.
func tableProblems(t tableInfo, configured []string) []Problem {
	subject := "table " + t.Name.String()
	if !t.Exists {
		return []Problem{{Subject: subject, Message: "does not exist",
			Fix: "create the table, or remove it from the pipeline's tables (names are case-sensitive)"}}
	}
	var ps []Problem
	if t.Kind != "r" && t.Kind != "p" {
		ps = append(ps, Problem{Subject: subject,
			Message: fmt.Sprintf("is not a table (relkind %q); views, materialized views and foreign tables cannot be replicated", t.Kind),
			Fix:     "replicate the underlying tables instead"})
	}
	if !t.CanRead {
		ps = append(ps, Problem{Subject: subject, Message: "the connecting role cannot SELECT from it (the backfill reads it)",
			Fix: fmt.Sprintf("GRANT SELECT ON %s TO <role>", quoteTable(t.Name))})
	}
	return append(ps, keyProblems(t, configured)...)
}

// keyProblems checks the key of a table: a primary key, or configured key columns that exist, are
// NOT NULL, hold a primary key or unique index (uniqueProblem) and are carried by the replica
// identity (so that deletes and key changes arrive with the old key).
func keyProblems(t tableInfo, configured []string) []Problem {
	subject := "table " + t.Name.String()
	if t.Identity == "n" {
		return []Problem{{Subject: subject, Message: "has REPLICA IDENTITY NOTHING: updates and deletes would arrive without a key",
			Fix: fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY DEFAULT (with a primary key) or FULL", quoteTable(t.Name))}}
	}
	if len(configured) == 0 {
		if len(t.PK) == 0 {
			return []Problem{{Subject: subject, Message: "has no primary key and no key is configured",
				Fix: fmt.Sprintf("add a primary key, or name key columns for it in the pipeline config (tables[].key) and run ALTER TABLE %s REPLICA IDENTITY FULL (or USING INDEX on a unique index over them)", quoteTable(t.Name))}}
		}
		if t.Identity == "i" && !covers(t.IdentIdx, t.PK) {
			return []Problem{{Subject: subject,
				Message: fmt.Sprintf("its replica identity index (%s) does not contain the primary key (%s): a key change would arrive without the old key", strings.Join(t.IdentIdx, ", "), strings.Join(t.PK, ", ")),
				Fix:     fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY DEFAULT", quoteTable(t.Name))}}
		}
		return nil
	}
	var ps []Problem
	for _, k := range configured {
		a, ok := t.hasColumn(k)
		switch {
		case !ok:
			ps = append(ps, Problem{Subject: subject, Message: fmt.Sprintf("the configured key column %q does not exist", k),
				Fix: "fix tables[].key in the pipeline config (names are case-sensitive)"})
		case !a.NotNull:
			ps = append(ps, Problem{Subject: fmt.Sprintf("column %s.%s", t.Name, k), Message: "is a configured key column but allows NULL",
				Fix: fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL, or choose other key columns", quoteTable(t.Name), quoteIdent(k))})
		}
	}
	if len(ps) > 0 {
		return ps
	}
	if p, ok := uniqueProblem(t, configured); !ok {
		ps = append(ps, p)
	}
	var identity []string
	switch t.Identity {
	case "f":
		return ps
	case "i":
		identity = t.IdentIdx
	default:
		identity = t.PK
	}
	if !covers(identity, configured) {
		what := "the primary key (" + strings.Join(identity, ", ") + ")"
		if t.Identity == "i" {
			what = "the replica identity index (" + strings.Join(identity, ", ") + ")"
		}
		if len(identity) == 0 {
			what = "no replica identity (no primary key)"
		}
		ps = append(ps, Problem{Subject: subject,
			Message: fmt.Sprintf("the configured key (%s) is not carried by the table's replica identity: it has %s, so deletes and key changes would arrive without the key", strings.Join(configured, ", "), what),
			Fix:     fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY FULL, or REPLICA IDENTITY USING INDEX on a unique index containing the key columns", quoteTable(t.Name))})
	}
	return ps
}

// uniqueProblem proves a configured key unique: it holds the columns of the primary key, or of
// a unique index (uniqueIndexes: valid, no expression, no WHERE) whose columns are NOT NULL or
// that is NULLS NOT DISTINCT. Otherwise two source rows can share the key, and the sink, which
// upserts and deletes by key, would keep one target row for both: ok is false and the problem
// names the key, the table's unique column sets and the fix.
func uniqueProblem(t tableInfo, key []string) (Problem, bool) {
	if len(t.PK) > 0 && covers(key, t.PK) {
		return Problem{}, true
	}
	var candidates []string
	for _, u := range t.Unique {
		usable := u.NullsNotDistinct
		if !usable {
			usable = true
			for _, c := range u.Columns {
				if a, ok := t.hasColumn(c); !ok || !a.NotNull {
					usable = false
				}
			}
		}
		if !usable {
			continue
		}
		if len(u.Columns) > 0 && covers(key, u.Columns) {
			return Problem{}, true
		}
		candidates = append(candidates, fmt.Sprintf("(%s) of index %s", strings.Join(u.Columns, ", "), u.Name))
	}
	fix := fmt.Sprintf("make the key unique in the source: CREATE UNIQUE INDEX ON %s (%s), or add a primary key over them; "+
		"or choose key columns (tables[].key) that hold the primary key or a unique index on NOT NULL columns",
		quoteTable(t.Name), quoteIdents(key))
	if len(candidates) > 0 {
		fix += ", such as " + strings.Join(candidates, " or ")
	}
	return Problem{Subject: "table " + t.Name.String(),
		Message: fmt.Sprintf("the configured key (%s) is not proven unique: it holds neither the primary key nor a unique index "+
			"(valid, without expressions or WHERE) on NOT NULL columns, so distinct source rows sharing a key would collapse "+
			"into one target row", strings.Join(key, ", ")),
		Fix: fix}, false
}

// quoteIdents quotes each name and joins them with commas.
func quoteIdents(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quoteIdent(n)
	}
	return strings.Join(q, ", ")
}

// covers reports whether every column of want is in have.
func covers(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return len(have) > 0
}

// arrowTypeCheck checks a column against batch's Arrow mapping.
func arrowTypeCheck(table batch.TableName) func(batch.Column) error {
	return func(c batch.Column) error {
		_, err := batch.ArrowSchema(batch.Schema{Table: table, Columns: []batch.Column{c}})
		return err
	}
}

// typeProblems asks check about every column of s. Every Postgres type maps (docs/types.md), so
// the batch mapping only refuses a column named like a context column; a destination's check
// (Config.CheckType) may refuse more.
func typeProblems(s batch.Schema, check func(batch.Column) error) []Problem {
	var ps []Problem
	for _, c := range s.Columns {
		if err := check(c); err != nil {
			ps = append(ps, Problem{Subject: fmt.Sprintf("column %s.%s", s.Table, c.Name),
				Message: fmt.Sprintf("(type %s) cannot be carried: %v", c.TypeName, err),
				Fix:     "rename the column, or remove the table from the pipeline"})
		}
	}
	return ps
}

// publication is what pg_publication holds about the pipeline's publication.
type publication struct {
	Exists    bool
	AllTables bool
	ViaRoot   bool              // publish_via_partition_root
	Actions   []string          // the missing actions among insert, update, delete, truncate
	Tables    map[string]pubRel // schema.name -> row filter / column list facts
	CanCreate bool              // CREATE on the database (needed to create it)
}

// pubRel is one table of a publication.
type pubRel struct {
	Where   string   // the row filter as pg_get_expr prints it; "" for none
	Columns []string // the column list in table order; nil for every column
}

func readPublication(ctx context.Context, conn *pgx.Conn, name string) (publication, error) {
	var p publication
	if err := conn.QueryRow(ctx, `SELECT has_database_privilege(current_database(), 'CREATE')`).Scan(&p.CanCreate); err != nil {
		return p, fmt.Errorf("reading database privileges: %w", err)
	}
	var ins, upd, del, trunc bool
	err := conn.QueryRow(ctx, `SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot FROM pg_catalog.pg_publication WHERE pubname = $1`, name).
		Scan(&p.AllTables, &ins, &upd, &del, &trunc, &p.ViaRoot)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("reading publication %s: %w", name, err)
	}
	p.Exists = true
	for action, on := range map[string]bool{"insert": ins, "update": upd, "delete": del, "truncate": trunc} {
		if !on {
			p.Actions = append(p.Actions, action)
		}
	}
	slices.Sort(p.Actions)
	rows, err := conn.Query(ctx, `
SELECT n.nspname || '.' || c.relname, coalesce(pg_catalog.pg_get_expr(r.prqual, r.prrelid), ''),
       (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_catalog.pg_attribute a
        WHERE r.prattrs IS NOT NULL AND a.attrelid = r.prrelid AND a.attnum = ANY(r.prattrs::int2[]))
FROM pg_catalog.pg_publication_rel r JOIN pg_catalog.pg_publication p ON p.oid = r.prpubid
JOIN pg_catalog.pg_class c ON c.oid = r.prrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE p.pubname = $1`, name)
	if err != nil {
		return p, fmt.Errorf("reading tables of publication %s: %w", name, err)
	}
	p.Tables = map[string]pubRel{}
	var (
		tname string
		rel   pubRel
	)
	_, err = pgx.ForEachRow(rows, []any{&tname, &rel.Where, &rel.Columns}, func() error {
		p.Tables[tname] = rel
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("reading tables of publication %s: %w", name, err)
	}
	return p, nil
}

// publicationProblems checks that the publication (when it exists) publishes every change of t,
// or that it can be created.
func publicationProblems(name string, p publication, t tableInfo) []Problem {
	subject := "publication " + name
	if !p.Exists {
		if !t.IsOwner {
			return []Problem{{Subject: subject, Message: fmt.Sprintf("does not exist, and creating it needs ownership of table %s", t.Name),
				Fix: fmt.Sprintf("create it as the table owner: CREATE PUBLICATION %s FOR TABLE ...; or grant the owning role to the pipeline's role", quoteIdent(name))}}
		}
		return nil
	}
	var ps []Problem
	if len(p.Actions) > 0 {
		ps = append(ps, Problem{Subject: subject, Message: fmt.Sprintf("does not publish %s: those changes of table %s would be skipped", strings.Join(p.Actions, ", "), t.Name),
			Fix: fmt.Sprintf("ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')", quoteIdent(name))})
	}
	if _, ok := p.Tables[t.Name.String()]; !ok && !p.AllTables && !t.IsOwner {
		ps = append(ps, Problem{Subject: subject, Message: fmt.Sprintf("does not include table %s and adding it needs ownership of the table", t.Name),
			Fix: fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s (as the table owner)", quoteIdent(name), quoteTable(t.Name))})
	}
	return ps
}

// slot is what pg_replication_slots holds about the pipeline's slot.
type slot struct {
	Exists    bool
	Plugin    string
	Type      string
	Database  string
	CurrentDB string
	WALStatus string
	Confirmed uint64 // confirmed_flush_lsn
	Active    bool
}

func readSlot(ctx context.Context, q querier, name string) (slot, error) {
	s := slot{}
	var confirmed *string
	err := q.QueryRow(ctx, `
SELECT coalesce(plugin, ''), slot_type, coalesce(database, ''), current_database(), coalesce(wal_status, ''),
       confirmed_flush_lsn::text, active
FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, name).
		Scan(&s.Plugin, &s.Type, &s.Database, &s.CurrentDB, &s.WALStatus, &confirmed, &s.Active)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("reading replication slot %s: %w", name, err)
	}
	s.Exists = true
	if confirmed != nil {
		lsn, err := parseLSN(*confirmed)
		if err != nil {
			return s, fmt.Errorf("reading replication slot %s: %w", name, err)
		}
		s.Confirmed = lsn
	}
	return s, nil
}

// slotProblems checks an existing slot: logical, pgoutput, this database, not invalidated. A
// missing slot is created by Setup; but a slot without its publication cannot decode.
func slotProblems(cfg Config, s slot, p publication) []Problem {
	subject := "replication slot " + cfg.Slot
	if !s.Exists {
		if !p.Exists && !p.CanCreate {
			return []Problem{{Subject: "publication " + cfg.Publication, Message: "does not exist and the role lacks CREATE on the database to create it",
				Fix: "GRANT CREATE ON DATABASE <db> TO <role>, or create the publication beforehand"}}
		}
		return nil
	}
	var ps []Problem
	switch {
	case s.Type != "logical":
		ps = append(ps, Problem{Subject: subject, Message: "is a physical slot", Fix: "choose another slot name for the pipeline"})
	case s.Plugin != "pgoutput":
		ps = append(ps, Problem{Subject: subject, Message: fmt.Sprintf("uses output plugin %q, sluice needs pgoutput", s.Plugin), Fix: "choose another slot name for the pipeline"})
	case s.Database != s.CurrentDB:
		return []Problem{{Subject: subject, Message: fmt.Sprintf("belongs to database %q, not %q (the database this pipeline reads): it is another pipeline's slot, or not Sluice's", s.Database, s.CurrentDB),
			Fix: "choose another source.slot for this pipeline (a slot name is unique on the server, across its databases)"}}
	case s.WALStatus == "lost":
		ps = append(ps, Problem{Subject: subject, Message: "was invalidated: the WAL it needed was removed (max_slot_wal_keep_size), changes were lost",
			Fix: "drop the slot (SELECT pg_drop_replication_slot('" + cfg.Slot + "')) and resync the pipeline's tables (they will be backfilled again)"})
	}
	if !p.Exists {
		ps = append(ps, Problem{Subject: "publication " + cfg.Publication,
			Message: fmt.Sprintf("does not exist but slot %s does: a publication created after the slot cannot decode the WAL the slot still holds", cfg.Slot),
			Fix:     fmt.Sprintf("drop the slot (SELECT pg_drop_replication_slot('%s')) so both are created again and the tables are backfilled, or create the publication under its original name", cfg.Slot)})
	}
	return ps
}
