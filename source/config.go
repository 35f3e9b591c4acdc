package source

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicecdc/sluice/batch"
)

// TableConfig names one source table of a pipeline.
type TableConfig struct {
	Table batch.TableName `json:"table"`
	// Key names the columns that identify a row when the table has no primary key (or a key other
	// than the primary key is wanted). The table's replica identity must carry these columns:
	// REPLICA IDENTITY FULL, or USING INDEX over an index that contains them. Empty means the
	// primary key.
	Key []string `json:"key,omitempty"`
	// Columns, when set, is the only columns replicated (the publication's column list for the
	// table); it must hold the key and the replica identity's columns.
	Columns []string `json:"columns,omitempty"`
	// ExcludeColumns are columns left out of the publication's column list; every other column
	// is replicated. At most one of Columns and ExcludeColumns is set.
	ExcludeColumns []string `json:"exclude_columns,omitempty"`
	// Where is a row filter (the publication's WHERE for the table, Postgres 15 or later), in SQL:
	// only rows for which it is true are replicated; the backfill reads with the same WHERE.
	Where string `json:"where,omitempty"`
	// OnPartitionChange is how a partitioned table reacts to partition changes the WAL cannot
	// show (package catalogwatch): resync (also when empty) or stop.
	OnPartitionChange string `json:"on_partition_change,omitempty"`
	// OnRecreate is how the table reacts to a new relation OID or a publication gap (the
	// reader's identity check): stop (also when empty) or resync.
	OnRecreate string `json:"on_recreate,omitempty"`
	// OnDropColumn is what the reader does when a column of the table is dropped: resync (also
	// when empty) or keep (follow the stream; rows not changed since keep their last value).
	OnDropColumn string `json:"on_drop_column,omitempty"`
	// OnRewrite is how a table reacts to a rewrite of its values the WAL cannot show (package
	// catalogwatch): resync (also when empty) or stop.
	OnRewrite string `json:"on_rewrite,omitempty"`
}

// filtered reports whether t replicates only some columns or rows.
func (t TableConfig) filtered() bool {
	return len(t.Columns) > 0 || len(t.ExcludeColumns) > 0 || t.Where != ""
}

// Config says where a pipeline reads from: the database, the pipeline's slot and publication and
// its tables. DSN is a credential: it is never logged or put in errors.
type Config struct {
	// Pipeline names the pipeline in the slot's record on its publication, so that another
	// pipeline naming the same slot is refused at setup; empty names none.
	Pipeline    string
	DSN         string        // a regular libpq connection string or URL for the source database
	Slot        string        // the pipeline's logical replication slot (pgoutput)
	Publication string        // the pipeline's publication
	Tables      []TableConfig // the tables the pipeline replicates
	// CheckType reports whether the destination side can carry a column of this type; nil means
	// batch's Arrow mapping (ArrowSchema). Check adds the table and column to its error.
	CheckType func(batch.Column) error
	// CheckTable reports whether the destination can lay out a table of this schema as
	// configured (an Iceberg target's partition and sort columns); nil checks nothing.
	CheckTable func(batch.Schema) error
}

// Validate checks the configuration's own shape (not the database): every problem at once.
func (c Config) Validate() error {
	var errs []string
	if strings.TrimSpace(c.DSN) == "" {
		errs = append(errs, "source DSN is empty: set the source connection string")
	} else if _, err := pgconn.ParseConfig(c.DSN); err != nil {
		// The parse error can quote the DSN, which can hold a password: do not wrap it.
		errs = append(errs, "source DSN cannot be parsed: check the connection string's syntax")
	}
	if !batch.ValidSlotName(c.Slot) {
		errs = append(errs, fmt.Sprintf("slot name %q is invalid: use 1-63 characters of a-z, 0-9 and _", c.Slot))
	}
	if c.Publication == "" || len(c.Publication) > 63 {
		errs = append(errs, fmt.Sprintf("publication name %q is invalid: use 1-63 characters", c.Publication))
	}
	if len(c.Tables) == 0 {
		errs = append(errs, "no tables configured: name at least one source table")
	}
	seen := map[batch.TableName]bool{}
	for i, t := range c.Tables {
		if t.Table.Schema == "" || t.Table.Name == "" {
			errs = append(errs, fmt.Sprintf("tables[%d]: want a schema-qualified name such as public.orders, got %q", i, t.Table.String()))
			continue
		}
		if seen[t.Table] {
			errs = append(errs, fmt.Sprintf("tables[%d]: table %s is listed twice", i, t.Table))
		}
		seen[t.Table] = true
		cols := map[string]bool{}
		for _, k := range t.Key {
			if k == "" || cols[k] {
				errs = append(errs, fmt.Sprintf("tables[%d].key: table %s: key column %q is empty or repeated", i, t.Table, k))
			}
			cols[k] = true
		}
		if len(t.Columns) > 0 && len(t.ExcludeColumns) > 0 {
			errs = append(errs, fmt.Sprintf("tables[%d]: table %s: set columns or exclude_columns, not both", i, t.Table))
		}
		for _, list := range [][]string{t.Columns, t.ExcludeColumns} {
			seen := map[string]bool{}
			for _, c := range list {
				if c == "" || seen[c] {
					errs = append(errs, fmt.Sprintf("tables[%d]: table %s: column %q is empty or repeated", i, t.Table, c))
				}
				seen[c] = true
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid source config:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// sessionParams are the settings both the replication and the snapshot connections run with, so
// that the text form of every value is the same on both paths (pgoutput formats values with the
// walsender's settings) and does not depend on server defaults.
var sessionParams = map[string]string{
	"DateStyle":          "ISO, MDY",
	"IntervalStyle":      "postgres",
	"TimeZone":           "UTC",
	"extra_float_digits": "3",
	"bytea_output":       "hex",
	"client_encoding":    "UTF8",
	"application_name":   "sluice",
}

// connConfig parses dsn and sets the session parameters; replication asks for a logical
// replication (walsender) connection to the database.
func connConfig(dsn string, replication bool) (*pgconn.Config, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing source DSN: %w", errRedacted)
	}
	for k, v := range sessionParams {
		cfg.RuntimeParams[k] = v
	}
	if replication {
		cfg.RuntimeParams["replication"] = "database"
	}
	cfg.BuildFrontend = bufferedFrontend
	return cfg, nil
}

// readBufferSize is the read buffer of the connections that carry rows in bulk (the snapshot's
// and the replication stream's). pgproto3 reads 8 KiB at a time: a backfill made a read system
// call every 30-odd rows, 5% of the worker's CPU.
const readBufferSize = 256 << 10

// bufferedFrontend is a pgconn.BuildFrontendFunc that reads through a readBufferSize buffer. A
// read still returns what one read of the socket gets: a quiet stream is not held back.
func bufferedFrontend(r io.Reader, w io.Writer) *pgproto3.Frontend {
	return pgproto3.NewFrontend(bufio.NewReaderSize(r, readBufferSize), w)
}
