package couchbase

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/sluicecdc/sluice/sinks"
)

// target is where one table's documents live, and where its checkpoint and key index live.
type target struct {
	table      string // the source table, schema.name, for messages
	name       string // the configured target, as given
	scope      string
	collection string
	meta       string // the metadata collection in the same scope
}

// String returns the target as bucket-relative scope.collection.
func (t target) String() string { return t.scope + "." + t.collection }

// parseTarget resolves spec.Target ([scope.]collection) against the configuration. A target that
// cannot be a Couchbase collection, or that is the metadata collection, is poison.
func (s *Sink) parseTarget(spec sinks.TableSpec) (target, error) {
	t := target{table: spec.Schema.Table.String(), name: spec.Target, scope: s.cfg.Scope, meta: s.cfg.MetadataCollection}
	parts := strings.Split(spec.Target, ".")
	switch len(parts) {
	case 1:
		t.collection = parts[0]
	case 2:
		t.scope, t.collection = parts[0], parts[1]
	default:
		return target{}, sinks.Poisonf("table %s: target %q is not a Couchbase collection; write collection or scope.collection",
			t.table, spec.Target)
	}
	if err := checkName(t.scope, "scope"); err != nil {
		return target{}, sinks.Poisonf("table %s: target %q: %w", t.table, spec.Target, err)
	}
	if err := checkName(t.collection, "collection"); err != nil {
		return target{}, sinks.Poisonf("table %s: target %q: %w", t.table, spec.Target, err)
	}
	if t.collection == t.meta {
		return target{}, sinks.Poisonf("table %s: target %q is the collection that holds Sluice's checkpoints "+
			"(sink.couchbase.metadata_collection); choose another target or another metadata_collection", t.table, spec.Target)
	}
	return t, nil
}

// Keys of the metadata documents of a target, in the metadata collection of its scope.
const (
	checkpointPrefix = "checkpoint::"
	indexPrefix      = "keys::"
)

// metaName is the collection's part of metadata keys: the collection name, or a hash of it when
// the name is too long for a key with the prefixes and a chunk number.
func (t target) metaName() string {
	if len(t.collection) <= 200 {
		return t.collection
	}
	h := sha256.Sum256([]byte(t.collection))
	return "sha256:" + hex.EncodeToString(h[:])
}

// checkpointKey is the key of the target's checkpoint document.
func (t target) checkpointKey() string { return checkpointPrefix + t.metaName() }

// indexKey is the key of the target's key-index chunk n.
func (t target) indexKey(n int) string {
	return indexPrefix + t.metaName() + "::" + strconv.Itoa(n)
}
