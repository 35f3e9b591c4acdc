package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

func (v *validator) tables(c *Config) {
	if len(c.Tables) == 0 {
		v.ps.add("tables", "no tables; list at least one, such as - {source: public.orders, target: raw.orders}")
		return
	}
	sources := map[string]int{}
	targets := map[string]int{}
	for i, t := range c.Tables {
		p := fmt.Sprintf("tables[%d]", i)
		if name, ok := v.tableSource(p+".source", t.Source); ok {
			key := name[0] + "." + name[1]
			if j, dup := sources[key]; dup {
				v.ps.add(p+".source", "%s is already listed as tables[%d]; list each source table once", t.Source, j)
			} else {
				sources[key] = i
			}
		}
		if target, ok := v.tableTarget(p+".target", t.Target, &c.Sink); ok {
			if j, dup := targets[target]; dup {
				v.ps.add(p+".target", "%s is already the target of tables[%d]; each table needs its own target", t.Target, j)
			} else {
				targets[target] = i
			}
		}
		v.metadata(p, t.Metadata)
		v.key(p+".key", t.Key)
		v.filters(p, t)
		if t.OnPartitionChange != "" && !slices.Contains(partitionPolicies, t.OnPartitionChange) {
			v.ps.add(p+".on_partition_change", "%q is not a reaction; use one of %s", t.OnPartitionChange, strings.Join(partitionPolicies, ", "))
		}
		if t.OnRecreate != "" && !slices.Contains(recreatePolicies, t.OnRecreate) {
			v.ps.add(p+".on_recreate", "%q is not a reaction; use one of %s", t.OnRecreate, strings.Join(recreatePolicies, ", "))
		}
		if t.OnDropColumn != "" && !slices.Contains(dropColumnPolicies, t.OnDropColumn) {
			v.ps.add(p+".on_drop_column", "%q is not a reaction; use one of %s", t.OnDropColumn, strings.Join(dropColumnPolicies, ", "))
		}
		if t.OnRewrite != "" && !slices.Contains(partitionPolicies, t.OnRewrite) {
			v.ps.add(p+".on_rewrite", "%q is not a reaction; use one of %s", t.OnRewrite, strings.Join(partitionPolicies, ", "))
		}
		v.tableIceberg(p+".iceberg", t, c.Sink.Type)
	}
}

// recreatePolicies are the values of tables[].on_recreate (reader.OnRecreate).
var recreatePolicies = []string{"stop", "resync"}

// partitionPolicies are the values of tables[].on_partition_change and tables[].on_rewrite
// (catalogwatch.Policy).
var partitionPolicies = []string{"resync", "stop"}

// dropColumnPolicies are the values of tables[].on_drop_column (source.TableConfig.OnDropColumn).
var dropColumnPolicies = []string{DropColumnResync, DropColumnKeep}

// filters checks a table's column list (columns or exclude_columns, not both) and row filter.
// Whether the columns exist and the filter is valid is checked against the database.
func (v *validator) filters(tablePath string, t Table) {
	if t.Columns != nil && t.ExcludeColumns != nil {
		v.ps.add(tablePath+".exclude_columns", "set together with columns; list the columns to replicate (columns) or those to leave out (exclude_columns), not both")
	}
	for _, l := range []struct {
		key  string
		cols []string
	}{{"columns", t.Columns}, {"exclude_columns", t.ExcludeColumns}} {
		path := tablePath + "." + l.key
		if l.cols != nil && len(l.cols) == 0 {
			v.ps.add(path, "empty; list column names, such as [id, name], or remove %s", l.key)
		}
		seen := map[string]int{}
		for i, c := range l.cols {
			p := fmt.Sprintf("%s[%d]", path, i)
			name, err := batch.ParseIdent(c)
			if err != nil {
				v.ps.add(p, "%q is not a column name: %v", c, err)
				continue
			}
			if j, dup := seen[name]; dup {
				v.ps.add(p, "%q is already listed as %s[%d]", c, path, j)
				continue
			}
			seen[name] = i
		}
	}
	if strings.Contains(t.Where, ";") {
		v.ps.add(tablePath+".where", "contains ';'; write one SQL boolean expression over the table's columns, such as status <> 'archived'")
	}
}

// tableSource checks a schema-qualified source name and returns its two parts.
func (v *validator) tableSource(path, source string) ([]string, bool) {
	if !v.required(path, source, "set the schema-qualified Postgres table, such as public.orders") {
		return nil, false
	}
	parts, err := batch.ParseQualifiedName(source)
	switch {
	case err != nil:
		v.ps.add(path, "%q is not a valid table name: %v", source, err)
		return nil, false
	case len(parts) == 1:
		v.ps.add(path, "%q is not schema-qualified; write schema.table, such as public.%s", source, source)
		return nil, false
	case len(parts) > 2:
		v.ps.add(path, "%q has %d parts; write schema.table (quote names that contain dots)", source, len(parts))
		return nil, false
	}
	return parts, true
}

// tableTarget checks a target against the naming rules of the sink and returns it with the
// sink's default database or scope filled in, for duplicate detection.
func (v *validator) tableTarget(path, target string, s *Sink) (string, bool) {
	if !v.required(path, target, "set the destination table, such as raw.orders") {
		return "", false
	}
	valid, minParts, maxParts, shape := batch.PlainName, 1, 0, "dotted names of letters, digits and _"
	switch s.Type {
	case SinkIceberg:
		minParts, shape = 2, "namespace.table, such as raw.orders"
	case SinkClickHouse:
		maxParts, shape = 2, "table or database.table, of letters, digits and _"
	case SinkCouchbase:
		valid, maxParts, shape = collectionRe.MatchString, 2, "collection or scope.collection, of letters, digits, _, - and %"
	}
	parts, ok := targetParts(target, valid)
	if !ok || len(parts) < minParts || (maxParts > 0 && len(parts) > maxParts) {
		v.ps.add(path, "%q is not a valid target; write %s", target, shape)
		return "", false
	}
	switch {
	case s.Type == SinkClickHouse && s.ClickHouse != nil && len(parts) == 1:
		return s.ClickHouse.Database + "." + target, true
	case s.Type == SinkCouchbase && s.Couchbase != nil && len(parts) == 1:
		return s.Couchbase.Scope + "." + target, true
	}
	return target, true
}

// metadata checks a table's metadata entries: known context columns and unique, valid names.
func (v *validator) metadata(tablePath string, entries []sinks.MetadataColumn) {
	names := map[string]int{}
	for i, m := range entries {
		p := fmt.Sprintf("%s.metadata[%d]", tablePath, i)
		switch {
		case m.From == "":
			v.ps.add(p+".from", "missing; use one of %s", strings.Join(batch.MetadataNames(), ", "))
		case !slices.Contains(batch.MetadataNames(), m.From):
			v.ps.add(p+".from", "%q is not a context column; use one of %s", m.From, strings.Join(batch.MetadataNames(), ", "))
		}
		switch {
		case m.As == "":
			v.ps.add(p+".as", "missing; name the destination column, such as committed_at")
		case !batch.PlainName(m.As):
			v.ps.add(p+".as", "%q is not allowed; use letters, digits and _ (not starting with a digit)", m.As)
		case strings.HasPrefix(m.As, "__"):
			v.ps.add(p+".as", "%q starts with __, which is reserved for Sluice's context columns; choose another name", m.As)
		default:
			lower := strings.ToLower(m.As)
			if j, dup := names[lower]; dup {
				v.ps.add(p+".as", "%q is already used by %s.metadata[%d]; each metadata column needs its own name", m.As, tablePath, j)
			} else {
				names[lower] = i
			}
		}
	}
}

// key checks a key override: nil keeps the primary key; otherwise at least one distinct column.
func (v *validator) key(path string, key []string) {
	if key == nil {
		return
	}
	if len(key) == 0 {
		v.ps.add(path, "empty; list the key columns, such as [id], or remove key to use the primary key")
		return
	}
	seen := map[string]int{}
	for i, k := range key {
		p := fmt.Sprintf("%s[%d]", path, i)
		name, err := batch.ParseIdent(k)
		if err != nil {
			v.ps.add(p, "%q is not a column name: %v", k, err)
			continue
		}
		if j, dup := seen[name]; dup {
			v.ps.add(p, "%q is already listed as %s[%d]", k, path, j)
			continue
		}
		seen[name] = i
	}
}
