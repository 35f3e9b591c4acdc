package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicecdc/sluice/config"

	// The warehouse file systems and the SQL catalog drivers the sink supports.
	_ "github.com/apache/iceberg-go/io/gocloud/s3"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// Config is the sink.iceberg section of a pipeline's configuration. It is defined, defaulted
// and validated once, in package config; New validates the Config it is given with
// config.Iceberg.Validate, so one built in Go meets the rules of a config file.
type Config = config.Iceberg

// CatalogConfig is the sink.iceberg.catalog section (config.IcebergCatalog).
type CatalogConfig = config.IcebergCatalog

// The catalog types and SQL dialects, as package config defines them.
const (
	CatalogSQL      = config.CatalogSQL
	CatalogREST     = config.CatalogREST
	DialectSQLite   = config.DialectSQLite
	DialectPostgres = config.DialectPostgres
)

// warehouseURL returns the configured warehouse as a URL: a plain path is a local directory,
// relative to the worker's working directory.
func warehouseURL(warehouse string) string {
	if warehouse != "" && !strings.Contains(warehouse, "://") {
		if abs, err := filepath.Abs(warehouse); err == nil {
			return "file://" + abs
		}
	}
	return warehouse
}

// ioProps are the file IO properties every table of the catalog uses.
func ioProps(c *Config) iceberg.Properties {
	p := iceberg.Properties{}
	if w := warehouseURL(c.Warehouse); w != "" {
		p["warehouse"] = w
	}
	if c.S3 == nil {
		return p
	}
	set := func(k, v string) {
		if v != "" {
			p[k] = v
		}
	}
	set(iceio.S3EndpointURL, c.S3.Endpoint)
	set(iceio.S3Region, c.S3.Region)
	set(iceio.S3AccessKeyID, c.S3.AccessKeyID)
	set(iceio.S3SecretAccessKey, c.S3.SecretAccessKey)
	return p
}

// restOptions are the options of the rest catalog c configures: its file IO properties, the
// warehouse, and the OAuth2 credential or bearer token that authenticate Sluice to it.
func restOptions(c *Config) []rest.Option {
	opts := []rest.Option{rest.WithAdditionalProps(ioProps(c))}
	if w := warehouseURL(c.Warehouse); w != "" {
		opts = append(opts, rest.WithWarehouseLocation(w))
	}
	if c.Catalog.Credential != "" {
		opts = append(opts, rest.WithCredential(c.Catalog.Credential))
	}
	if c.Catalog.Token != "" {
		opts = append(opts, rest.WithOAuthToken(c.Catalog.Token))
	}
	return opts
}

// openCatalog connects to the configured catalog. c must be validated (which fills in defaults).
func openCatalog(ctx context.Context, c *Config) (catalog.Catalog, error) {
	switch c.Catalog.Type {
	case CatalogREST:
		cat, err := rest.NewCatalog(ctx, c.Catalog.Name, c.Catalog.URI, restOptions(c)...)
		if errors.Is(err, rest.ErrOAuthError) {
			return nil, fmt.Errorf("the rest catalog at sink.iceberg.catalog.uri refused the OAuth2 client credential "+
				"sink.iceberg.catalog.credential (client_id:client_secret); check it (%s): %w", config.EnvName("sink.iceberg.catalog.credential"), err)
		}
		if err != nil {
			return nil, fmt.Errorf("connecting to the rest catalog at sink.iceberg.catalog.uri: %w", err)
		}
		if err := checkRESTAuth(ctx, cat); err != nil {
			return nil, err
		}
		return cat, nil
	case CatalogSQL:
		driver, dsn := "pgx", c.Catalog.URI
		if c.Catalog.Dialect == DialectSQLite {
			driver, dsn = "sqlite", sqliteDSN(c.Catalog.URI)
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return nil, fmt.Errorf("opening the sql catalog database (sink.iceberg.catalog.uri): %w", err)
		}
		if err := db.PingContext(ctx); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("connecting to the sql catalog database (sink.iceberg.catalog.uri): %w", err)
		}
		props := ioProps(c)
		props[sqlcat.SchemaVersionKey] = sqlcat.SchemaVersionV1
		cat, err := sqlcat.NewCatalog(c.Catalog.Name, db, sqlcat.SupportedDialect(c.Catalog.Dialect), props)
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("initialising the sql catalog tables: %w", err)
		}
		return &sqlCatalog{Catalog: cat, db: db}, nil
	}
	return nil, fmt.Errorf("sink.iceberg.catalog.type: unknown catalog type %q", c.Catalog.Type)
}

// checkRESTAuth makes one authenticated request (does a namespace exist), so that a catalog
// that refuses Sluice's token (or needs one and got none) fails the connection with the keys to
// fix, rather than the first table operation. A catalog answers its config endpoint without
// authentication, so connecting alone proves nothing.
func checkRESTAuth(ctx context.Context, cat *rest.Catalog) error {
	_, err := cat.CheckNamespaceExists(ctx, table.Identifier{"sluice"})
	if errors.Is(err, rest.ErrUnauthorized) || errors.Is(err, rest.ErrAuthorizationExpired) {
		return fmt.Errorf("the rest catalog at sink.iceberg.catalog.uri refused Sluice's requests as unauthenticated: "+
			"set sink.iceberg.catalog.token (%s) to a token it accepts, or sink.iceberg.catalog.credential to an OAuth2 client it knows: %w",
			config.EnvName("sink.iceberg.catalog.token"), err)
	}
	return nil // anything else (forbidden to look, unreachable) shows on the table operations, with their names
}

// sqlCatalog closes the database handle it was given along with the catalog.
type sqlCatalog struct {
	*sqlcat.Catalog
	db *sql.DB
}

// Close releases the catalog's database connections.
func (s *sqlCatalog) Close() error { return s.db.Close() }

// sqliteDSN turns a sqlite file path into a modernc DSN that waits for locks instead of failing
// (several tables commit concurrently) and uses the write-ahead log.
func sqliteDSN(uri string) string {
	if strings.Contains(uri, "?") {
		return uri
	}
	if !strings.HasPrefix(uri, "file:") {
		uri = "file:" + uri
	}
	return uri + "?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_txlock=immediate"
}
