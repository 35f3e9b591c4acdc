package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"

	// The warehouse file systems and the SQL catalog drivers the sink supports.
	_ "github.com/apache/iceberg-go/io/gocloud/s3"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// The catalog types and SQL dialects Config accepts.
const (
	CatalogSQL  = "sql"
	CatalogREST = "rest"

	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

// Config is the sink.iceberg section of a pipeline's configuration.
type Config struct {
	Catalog CatalogConfig `mapstructure:"catalog" json:"catalog"`
	// Warehouse is where table data and metadata live: file:///abs/dir or s3://bucket/prefix.
	// A plain path is taken as a local directory.
	Warehouse string   `mapstructure:"warehouse" json:"warehouse"`
	S3        S3Config `mapstructure:"s3" json:"s3"`
	// PartitionBuckets, when positive, partitions new tables by bucket(N) of the first key column.
	// Zero (the default) creates unpartitioned tables. Existing tables keep their spec.
	PartitionBuckets int `mapstructure:"partition_buckets" json:"partition_buckets"`
	// TargetFileSizeBytes is the data file size compaction aims for; zero means 128 MiB.
	TargetFileSizeBytes int64 `mapstructure:"target_file_size_bytes" json:"target_file_size_bytes"`
	// CompressionLevel is the zstd level of the Parquet data files of the tables the sink
	// creates (their write.parquet.compression-level property), 1 to 22; zero means 1, zstd's
	// fastest. A backfill spends a fifth of the worker's CPU in zstd at level 3, Iceberg's own
	// default, about half of that at level 1 for files a few percent larger; compaction rewrites
	// files at the table's level.
	CompressionLevel int `mapstructure:"compression_level" json:"compression_level"`
}

// defaultCompressionLevel is the zstd level of new tables' data files unless configured.
const defaultCompressionLevel = 1

// CatalogConfig says which Iceberg catalog holds the tables.
type CatalogConfig struct {
	Type    string `mapstructure:"type" json:"type"`       // sql (default) or rest
	URI     string `mapstructure:"uri" json:"uri"`         // sqlite file, postgres DSN, or REST URL
	Dialect string `mapstructure:"dialect" json:"dialect"` // sql only: sqlite (default) or postgres
	Name    string `mapstructure:"name" json:"name"`       // catalog name; default "sluice"
	// Credential is a REST OAuth2 client credential (client_id:client_secret); Token a bearer token.
	Credential string `mapstructure:"credential" json:"credential"`
	Token      string `mapstructure:"token" json:"token"`
}

// S3Config holds the object store settings for an s3:// warehouse (AWS or an S3-compatible store).
type S3Config struct {
	Endpoint        string `mapstructure:"endpoint" json:"endpoint"`
	Region          string `mapstructure:"region" json:"region"`
	AccessKeyID     string `mapstructure:"access_key_id" json:"access_key_id"`
	SecretAccessKey string `mapstructure:"secret_access_key" json:"secret_access_key"`
}

const defaultCatalogName = "sluice"

// withDefaults returns c with the documented defaults filled in.
func (c Config) withDefaults() Config {
	if c.Catalog.Type == "" {
		c.Catalog.Type = CatalogSQL
	}
	if c.Catalog.Type == CatalogSQL && c.Catalog.Dialect == "" {
		c.Catalog.Dialect = DialectSQLite
	}
	if c.Catalog.Name == "" {
		c.Catalog.Name = defaultCatalogName
	}
	if c.Warehouse != "" && !strings.Contains(c.Warehouse, "://") {
		if abs, err := filepath.Abs(c.Warehouse); err == nil {
			c.Warehouse = "file://" + abs
		}
	}
	if c.TargetFileSizeBytes == 0 {
		c.TargetFileSizeBytes = 128 << 20
	}
	if c.CompressionLevel == 0 {
		c.CompressionLevel = defaultCompressionLevel
	}
	return c
}

// Validate reports every problem of the configuration at once, each with its key path under
// sink.iceberg and the allowed values.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	switch c.Catalog.Type {
	case CatalogSQL:
		if c.Catalog.URI == "" {
			bad("sink.iceberg.catalog.uri: required for the sql catalog (a sqlite file path or a postgres DSN)")
		}
		if c.Catalog.Dialect != DialectSQLite && c.Catalog.Dialect != DialectPostgres {
			bad("sink.iceberg.catalog.dialect: must be sqlite or postgres (got %q)", c.Catalog.Dialect)
		}
		if c.Warehouse == "" {
			bad("sink.iceberg.warehouse: required for the sql catalog (file:///dir or s3://bucket/prefix)")
		}
	case CatalogREST:
		if u, err := url.Parse(c.Catalog.URI); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			bad("sink.iceberg.catalog.uri: the rest catalog wants an http(s) URL (got %q)", c.Catalog.URI)
		}
	default:
		bad("sink.iceberg.catalog.type: must be sql or rest (got %q)", c.Catalog.Type)
	}
	if c.Warehouse != "" {
		u, err := url.Parse(c.Warehouse)
		switch {
		case err != nil:
			bad("sink.iceberg.warehouse: %v", err)
		case u.Scheme != "file" && u.Scheme != "s3" && u.Scheme != "s3a":
			bad("sink.iceberg.warehouse: must be file:///abs/dir or s3://bucket/prefix (got %q)", c.Warehouse)
		case u.Scheme != "file" && u.Host == "":
			bad("sink.iceberg.warehouse: %q names no bucket", c.Warehouse)
		}
	}
	if (c.S3.AccessKeyID == "") != (c.S3.SecretAccessKey == "") {
		bad("sink.iceberg.s3: access_key_id and secret_access_key go together; set both or neither")
	}
	if c.PartitionBuckets < 0 {
		bad("sink.iceberg.partition_buckets: must be 0 (unpartitioned) or positive (got %d)", c.PartitionBuckets)
	}
	if c.TargetFileSizeBytes < 0 {
		bad("sink.iceberg.target_file_size_bytes: must be positive (got %d)", c.TargetFileSizeBytes)
	}
	if c.CompressionLevel < 1 || c.CompressionLevel > 22 {
		bad("sink.iceberg.compression_level: must be a zstd level from 1 (fastest) to 22 (smallest files) (got %d)", c.CompressionLevel)
	}
	return errors.Join(errs...)
}

// ioProps are the file IO properties every table of the catalog uses.
func (c Config) ioProps() iceberg.Properties {
	p := iceberg.Properties{}
	if c.Warehouse != "" {
		p["warehouse"] = c.Warehouse
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

// openCatalog connects to the configured catalog. c must be validated and defaulted.
func openCatalog(ctx context.Context, c Config) (catalog.Catalog, error) {
	props := c.ioProps()
	switch c.Catalog.Type {
	case CatalogREST:
		opts := []rest.Option{rest.WithAdditionalProps(props)}
		if c.Warehouse != "" {
			opts = append(opts, rest.WithWarehouseLocation(c.Warehouse))
		}
		if c.Catalog.Credential != "" {
			opts = append(opts, rest.WithCredential(c.Catalog.Credential))
		}
		if c.Catalog.Token != "" {
			opts = append(opts, rest.WithOAuthToken(c.Catalog.Token))
		}
		cat, err := rest.NewCatalog(ctx, c.Catalog.Name, c.Catalog.URI, opts...)
		if err != nil {
			return nil, fmt.Errorf("connecting to the rest catalog at sink.iceberg.catalog.uri: %w", err)
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
