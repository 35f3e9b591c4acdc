package source

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicecdc/sluice/batch"
)

// PublicationMark is what the pipeline's publication publishes now, with the marker of its
// catalog row: Xmin (the pg_publication row's xmin) changes at every ALTER PUBLICATION ... SET,
// so a publish flag turned off and on again between two reads shows as a new Xmin with the same
// flags.
type PublicationMark struct {
	Exists    bool   `json:"exists"`
	Xmin      uint32 `json:"xmin,omitempty"`
	AllTables bool   `json:"all_tables,omitempty"`
	ViaRoot   bool   `json:"via_root,omitempty"`
	// Unpublished are the actions (insert, update, delete, truncate) it does not publish, sorted.
	Unpublished []string `json:"unpublished,omitempty"`
}

// TableMark is what the catalog says now about one of the pipeline's tables.
type TableMark struct {
	// RelID is the table's relation OID (0: no such table).
	RelID uint32 `json:"relid"`
	// Member says how the table is in the publication: MemberAllTables, "rel <oid>" (the oid of
	// its pg_publication_rel row, new each time the table joins the publication again), or ""
	// when it is not in it.
	Member string `json:"member,omitempty"`
}

// MemberAllTables is TableMark.Member for a table of a FOR ALL TABLES publication.
const MemberAllTables = "all tables"

// Identity is the catalog's view of the pipeline's publication and tables at one moment.
type Identity struct {
	// At is the WAL insert position when the catalog was read: a change committed before it is
	// in the view, one committed after it is not.
	At          uint64
	Publication PublicationMark
	Tables      map[batch.TableName]TableMark
}

// identitySQL reads the publication's row and each table's OID and membership in one statement
// (one snapshot). $1 is the publication, $2 and $3 the tables' schemas and names.
const identitySQL = `
SELECT pg_catalog.pg_current_wal_lsn()::text, p.oid IS NOT NULL, coalesce(p.xmin::text, '0'),
       coalesce(p.puballtables, false), coalesce(p.pubviaroot, false),
       coalesce(p.pubinsert, false), coalesce(p.pubupdate, false), coalesce(p.pubdelete, false), coalesce(p.pubtruncate, false),
       t.s, t.n, coalesce(c.oid, 0)::text, coalesce(r.oid, 0)::text
FROM unnest($2::text[], $3::text[]) AS t(s, n)
LEFT JOIN pg_catalog.pg_publication p ON p.pubname = $1
LEFT JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n AND c.relkind IN ('r', 'p')
LEFT JOIN pg_catalog.pg_publication_rel r ON r.prrelid = c.oid AND r.prpubid = p.oid`

// Identity reads the catalog's view of publication and tables (see Identity). Safe for
// concurrent use.
func (f *Fetcher) Identity(ctx context.Context, publication string, tables []batch.TableName) (Identity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return Identity{}, fmt.Errorf("reading the tables' identity: the fetcher is closed")
	}
	return readIdentity(ctx, f.conn, publication, tables)
}

func readIdentity(ctx context.Context, conn *pgconn.PgConn, publication string, tables []batch.TableName) (Identity, error) {
	out := Identity{Tables: map[batch.TableName]TableMark{}}
	if len(tables) == 0 {
		return out, nil
	}
	schemas, names := make([]string, len(tables)), make([]string, len(tables))
	for i, t := range tables {
		schemas[i], names[i] = t.Schema, t.Name
	}
	res := conn.ExecParams(ctx, identitySQL, [][]byte{[]byte(publication), []byte(textArray(schemas)), []byte(textArray(names))}, nil, nil, nil).Read()
	if res.Err != nil {
		return out, fmt.Errorf("reading the identity of the tables of publication %s: %w", publication, res.Err)
	}
	for i, row := range res.Rows {
		if i == 0 {
			if err := scanPublicationMark(row, &out); err != nil {
				return out, fmt.Errorf("reading publication %s: %w", publication, err)
			}
		}
		t := batch.TableName{Schema: string(row[9]), Name: string(row[10])}
		rel, err1 := strconv.ParseUint(string(row[11]), 10, 32)
		member, err2 := strconv.ParseUint(string(row[12]), 10, 32)
		if err1 != nil || err2 != nil {
			return out, fmt.Errorf("reading the identity of table %s: bad oid %q or %q", t, row[11], row[12])
		}
		m := TableMark{RelID: uint32(rel)}
		switch {
		case rel == 0:
		case out.Publication.AllTables:
			m.Member = MemberAllTables
		case member != 0:
			m.Member = "rel " + strconv.FormatUint(member, 10)
		}
		out.Tables[t] = m
	}
	return out, nil
}

// scanPublicationMark reads the position and the publication's columns of an identitySQL row.
func scanPublicationMark(row [][]byte, out *Identity) error {
	at, err := parseLSN(string(row[0]))
	if err != nil {
		return err
	}
	out.At = at
	p := &out.Publication
	p.Exists = string(row[1]) == "t"
	if !p.Exists {
		return nil
	}
	xmin, err := strconv.ParseUint(string(row[2]), 10, 32)
	if err != nil {
		return fmt.Errorf("bad xmin %q", row[2])
	}
	p.Xmin = uint32(xmin)
	p.AllTables, p.ViaRoot = string(row[3]) == "t", string(row[4]) == "t"
	for i, action := range []string{"insert", "update", "delete", "truncate"} {
		if string(row[5+i]) != "t" {
			p.Unpublished = append(p.Unpublished, action)
		}
	}
	slices.Sort(p.Unpublished)
	return nil
}

// Republish adds the configured tables the publication lacks back to it, as Setup does (a table
// dropped and re-created leaves the publication), and returns the tables it added. A table that
// does not exist is skipped: it cannot be added.
func Republish(ctx context.Context, cfg Config, log *slog.Logger) ([]batch.TableName, error) {
	conn, err := connect(ctx, cfg.DSN)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var present []TableConfig
	for _, t := range cfg.Tables {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT pg_catalog.to_regclass($1) IS NOT NULL`, quoteTable(t.Table)).Scan(&exists); err != nil {
			return nil, fmt.Errorf("checking that table %s exists: %w", t.Table, err)
		}
		if exists {
			present = append(present, t)
		}
	}
	cfg.Tables = present
	return ensurePublication(ctx, conn, cfg, log)
}
