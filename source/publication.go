package source

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/sluicecdc/sluice/batch"
)

// Published is what the pipeline's publication holds now (not as of the WAL being decoded).
type Published struct {
	Exists    bool
	AllTables bool              // FOR ALL TABLES: every table is published, none can be dropped
	Tables    []batch.TableName // the FOR TABLE list, sorted
}

// Has reports whether the publication publishes table now.
func (p Published) Has(table batch.TableName) bool {
	return p.AllTables || slices.Contains(p.Tables, table)
}

// ReadPublished reads the publication's tables. A table of it that the config does not list
// was removed from the config and waits for `sluice remove`.
func ReadPublished(ctx context.Context, dsn, publication string) (Published, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return Published{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return readPublished(ctx, conn, publication)
}

func readPublished(ctx context.Context, conn *pgx.Conn, publication string) (Published, error) {
	var out Published
	err := conn.QueryRow(ctx, `SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = $1`, publication).Scan(&out.AllTables)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("reading publication %s: %w", publication, err)
	}
	out.Exists = true
	rows, err := conn.Query(ctx, `
SELECT n.nspname::text, c.relname::text
FROM pg_catalog.pg_publication_rel r JOIN pg_catalog.pg_publication p ON p.oid = r.prpubid
JOIN pg_catalog.pg_class c ON c.oid = r.prrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE p.pubname = $1 ORDER BY 1, 2`, publication)
	if err != nil {
		return out, fmt.Errorf("reading tables of publication %s: %w", publication, err)
	}
	var t batch.TableName
	if _, err := pgx.ForEachRow(rows, []any{&t.Schema, &t.Name}, func() error {
		out.Tables = append(out.Tables, t)
		return nil
	}); err != nil {
		return out, fmt.Errorf("reading tables of publication %s: %w", publication, err)
	}
	return out, nil
}

// DropFromPublication removes table from the FOR TABLE publication (ALTER PUBLICATION ... DROP
// TABLE) and reports whether it was there. The slot stops decoding the table's changes from WAL
// written after the drop; WAL written before it still carries them, and the reader skips them
// because the table is no longer published (reader.Deps.Published). A FOR ALL TABLES
// publication cannot drop a table: an error says so.
func DropFromPublication(ctx context.Context, dsn, publication string, table batch.TableName) (bool, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	pub, err := readPublished(ctx, conn, publication)
	if err != nil {
		return false, err
	}
	if pub.AllTables {
		return false, fmt.Errorf("publication %s is FOR ALL TABLES: table %s cannot be dropped from it (the reader skips the changes of a table the config does not list)",
			publication, table)
	}
	if !pub.Has(table) {
		return false, nil
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER PUBLICATION %s DROP TABLE %s", quoteIdent(publication), quoteTable(table))); err != nil {
		return false, fmt.Errorf("dropping table %s from publication %s: %w", table, publication, err)
	}
	return true, nil
}
