package couchbase

import (
	"fmt"
	"regexp"

	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/config"
)

// Config is the sink.couchbase section of a pipeline's configuration. It is defined, defaulted
// and validated once, in package config; New validates the Config it is given with
// config.Couchbase.Validate, so one built in Go meets the rules of a config file.
type Config = config.Couchbase

// nameRe is what Couchbase accepts for bucket, scope and collection names.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9_%-]{1,251}$`)

// checkName checks a target's scope or collection name: Couchbase's characters, and no leading
// _ or % except the _default scope and collection.
func checkName(name, what string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("%q is not a %s name; use 1 to 251 letters, digits, _, - and %%", name, what)
	}
	if name != config.DefaultCouchbaseScope && (name[0] == '_' || name[0] == '%') {
		return fmt.Errorf("%q is not a %s name; only _default may start with _ or %%", name, what)
	}
	return nil
}

// durabilityLevel maps the configured level (validated by package config) to gocb's.
func durabilityLevel(s string) (gocb.DurabilityLevel, error) {
	switch s {
	case config.DurabilityNone:
		return gocb.DurabilityLevelNone, nil
	case config.DurabilityMajority:
		return gocb.DurabilityLevelMajority, nil
	case config.DurabilityMajorityAndPersistActive:
		return gocb.DurabilityLevelMajorityAndPersistOnMaster, nil
	case config.DurabilityPersistToMajority:
		return gocb.DurabilityLevelPersistToMajority, nil
	}
	return 0, fmt.Errorf("sink.couchbase.durability: %q is not a durability level", s)
}
