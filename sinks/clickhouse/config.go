package clickhouse

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"time"
)

// The table layouts Config.Schema selects.
const (
	// SchemaAuto picks SchemaModern on servers that support it (23.2 and later) and
	// SchemaCompatible on older ones. Existing tables keep the layout they were created with.
	SchemaAuto = "auto"
	// SchemaModern creates ReplacingMergeTree(_version, _is_deleted) tables, whose FINAL hides
	// tombstones, with Date32, DateTime64(6) and Bool columns. It needs ClickHouse 23.2 or later.
	SchemaModern = "modern"
	// SchemaCompatible creates ReplacingMergeTree(_version) tables with the deleted flag as a plain
	// column and a <table>_current view that hides tombstones, with Date, DateTime and UInt8
	// columns. It works on every server this sink supports (18.16 and later).
	SchemaCompatible = "compatible"
)

// Defaults of Config.
const (
	DefaultDatabase     = "default"
	DefaultUsername     = "default"
	DefaultDialTimeout  = 10 * time.Second
	DefaultReadTimeout  = 5 * time.Minute
	DefaultMaxOpenConns = 8
)

// Config is the sink.clickhouse section of a pipeline's configuration.
type Config struct {
	// Addr is host:port of the native protocol (9000, or 9440 with TLS).
	Addr string `mapstructure:"addr" json:"addr"`
	// Database holds targets named without a database; default "default". It is created when
	// missing.
	Database string `mapstructure:"database" json:"database"`
	Username string `mapstructure:"username" json:"username"`
	Password string `mapstructure:"password" json:"password,omitempty"`
	TLS      bool   `mapstructure:"tls" json:"tls,omitempty"`
	// Schema selects the layout of new tables: auto (default), modern or compatible. Asking for
	// modern on a server older than 23.2 is refused when the sink starts.
	Schema string `mapstructure:"schema" json:"schema,omitempty"`
	// DialTimeout bounds connecting; ReadTimeout bounds waiting for one reply (an insert or a
	// query). Zero means DefaultDialTimeout and DefaultReadTimeout.
	DialTimeout time.Duration `mapstructure:"dial_timeout" json:"dial_timeout,omitempty"`
	ReadTimeout time.Duration `mapstructure:"read_timeout" json:"read_timeout,omitempty"`
	// MaxOpenConns bounds the connection pool; zero means DefaultMaxOpenConns.
	MaxOpenConns int `mapstructure:"max_open_conns" json:"max_open_conns,omitempty"`
}

// identRE is what the sink accepts as a database or table name: the driver's batch insert parses
// the statement and cannot handle every quoted name.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate reports every problem of c at once, naming the setting and what to do.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("sink.clickhouse.addr: missing; set host:port of the native protocol (usually 9000)"))
	} else if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("sink.clickhouse.addr: %q is not host:port", c.Addr))
	}
	if c.Database != "" && !identRE.MatchString(c.Database) {
		errs = append(errs, fmt.Errorf("sink.clickhouse.database: %q is not allowed; use letters, digits and _", c.Database))
	}
	switch c.Schema {
	case "", SchemaAuto, SchemaModern, SchemaCompatible:
	default:
		errs = append(errs, fmt.Errorf("sink.clickhouse.schema: %q is not a schema; use one of %s, %s or %s",
			c.Schema, SchemaAuto, SchemaModern, SchemaCompatible))
	}
	if c.DialTimeout < 0 || c.ReadTimeout < 0 || c.MaxOpenConns < 0 {
		errs = append(errs, errors.New("sink.clickhouse: dial_timeout, read_timeout and max_open_conns must not be negative"))
	}
	return errors.Join(errs...)
}

// withDefaults returns c with the documented defaults filled in.
func (c Config) withDefaults() Config {
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if c.Username == "" {
		c.Username = DefaultUsername
	}
	if c.Schema == "" {
		c.Schema = SchemaAuto
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.MaxOpenConns == 0 {
		c.MaxOpenConns = DefaultMaxOpenConns
	}
	return c
}
