package couchbase

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/couchbase/gocb/v2"
)

// The durability levels Config.Durability accepts.
const (
	DurabilityNone                     = "none"
	DurabilityMajority                 = "majority"
	DurabilityMajorityAndPersistActive = "majority_and_persist_active"
	DurabilityPersistToMajority        = "persist_to_majority"
	defaultDurability                  = DurabilityMajority
	defaultScope                       = "_default"
	defaultMetadataCollection          = "sluice_meta"
	defaultConcurrency                 = 32
	defaultTimeout                     = 30 * time.Second
	maxConcurrency                     = 1024
	durabilityValues                   = "none, majority, majority_and_persist_active or persist_to_majority"
)

// Config is the sink.couchbase section of a pipeline's configuration.
type Config struct {
	ConnStr  string `mapstructure:"connstr" json:"connstr"` // couchbase://host or couchbases://host
	Username string `mapstructure:"username" json:"username"`
	Password string `mapstructure:"password" json:"password,omitempty"`
	Bucket   string `mapstructure:"bucket" json:"bucket"`
	// Scope is the scope of targets that name only a collection; default _default.
	Scope string `mapstructure:"scope" json:"scope"`
	// MetadataCollection is the collection, in each target's scope, that holds the sink's
	// checkpoint and key-index documents; default sluice_meta. It is created when missing and
	// must not be a target.
	MetadataCollection string `mapstructure:"metadata_collection" json:"metadata_collection"`
	// Durability is the durability level of every write: none, majority (the default),
	// majority_and_persist_active or persist_to_majority. With none, a failover of a node can
	// lose acknowledged documents while the checkpoint written after them survives: rows can be
	// lost. Use none only on a bucket without replicas you can afford to resync.
	Durability string `mapstructure:"durability" json:"durability"`
	// Concurrency bounds the KV operations one Apply or DiscardSnapshot has in flight; default 32.
	Concurrency int `mapstructure:"concurrency" json:"concurrency"`
	// Timeout bounds each KV operation and connecting; default 30s.
	Timeout time.Duration `mapstructure:"timeout" json:"timeout"`
}

// nameRe is what Couchbase accepts for bucket, scope and collection names.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9_%-]{1,251}$`)

// withDefaults returns c with the documented defaults filled in.
func (c Config) withDefaults() Config {
	if c.Scope == "" {
		c.Scope = defaultScope
	}
	if c.MetadataCollection == "" {
		c.MetadataCollection = defaultMetadataCollection
	}
	if c.Durability == "" {
		c.Durability = defaultDurability
	}
	if c.Concurrency == 0 {
		c.Concurrency = defaultConcurrency
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	return c
}

// Validate reports every problem of the configuration at once, each with its key path under
// sink.couchbase and the allowed values.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !strings.HasPrefix(c.ConnStr, "couchbase://") && !strings.HasPrefix(c.ConnStr, "couchbases://") {
		bad("sink.couchbase.connstr: %q is not a Couchbase connection string; write couchbase://host or couchbases://host (TLS)", c.ConnStr)
	}
	if c.Username == "" {
		bad("sink.couchbase.username: missing; set the user Sluice writes as")
	}
	if c.Password == "" {
		bad("sink.couchbase.password: missing; set it with SLUICE_SINK_COUCHBASE_PASSWORD")
	}
	if !nameRe.MatchString(c.Bucket) {
		bad("sink.couchbase.bucket: %q is not a bucket name; use letters, digits, _, - and %%", c.Bucket)
	}
	if err := checkName(c.Scope, "scope"); err != nil {
		bad("sink.couchbase.scope: %v", err)
	}
	if err := checkName(c.MetadataCollection, "collection"); err != nil {
		bad("sink.couchbase.metadata_collection: %v", err)
	}
	if _, err := durabilityLevel(c.Durability); err != nil {
		bad("sink.couchbase.durability: %v", err)
	}
	if c.Concurrency < 1 || c.Concurrency > maxConcurrency {
		bad("sink.couchbase.concurrency: must be between 1 and %d (got %d)", maxConcurrency, c.Concurrency)
	}
	if c.Timeout < 0 {
		bad("sink.couchbase.timeout: must be positive (got %s)", c.Timeout)
	}
	return errors.Join(errs...)
}

// checkName checks a scope or collection name: Couchbase's characters, and no leading _ or %
// except the _default scope and collection.
func checkName(name, what string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("%q is not a %s name; use 1 to 251 letters, digits, _, - and %%", name, what)
	}
	if name != defaultScope && (name[0] == '_' || name[0] == '%') {
		return fmt.Errorf("%q is not a %s name; only _default may start with _ or %%", name, what)
	}
	return nil
}

// durabilityLevel maps the configured level to gocb's.
func durabilityLevel(s string) (gocb.DurabilityLevel, error) {
	switch s {
	case DurabilityNone:
		return gocb.DurabilityLevelNone, nil
	case DurabilityMajority:
		return gocb.DurabilityLevelMajority, nil
	case DurabilityMajorityAndPersistActive:
		return gocb.DurabilityLevelMajorityAndPersistOnMaster, nil
	case DurabilityPersistToMajority:
		return gocb.DurabilityLevelPersistToMajority, nil
	}
	return 0, fmt.Errorf("%q is not a durability level; use %s", s, durabilityValues)
}
