package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicecdc/sluice/batch"
)

// TableIceberg is the Iceberg layout of one table's target (tables[].iceberg); it is allowed only
// with sink.type iceberg. It shapes tables the sink creates; see IcebergLayout for what happens
// to an existing table.
type TableIceberg struct {
	// PartitionBy lists the partition fields in order: a column (identity), or a transform of
	// one: bucket(N, col), truncate(W, col), year(col), month(col), day(col), hour(col). Iceberg's
	// own spellings bucket[N](col) and truncate[W](col) are accepted too. Empty means the sink's
	// partition_buckets, or unpartitioned.
	PartitionBy []string `json:"partition_by,omitempty"`
	// SortBy is the table's sort order: entries such as created_at, id desc, day(created_at) asc
	// nulls last. Empty means unsorted.
	SortBy []string `json:"sort_by,omitempty"`
	// Properties are set on the table as they are (Iceberg table properties such as
	// write.metadata.previous-versions-max), except those the sink relies on (reservedProperty).
	// A list of key/value entries, not a mapping: property names contain dots, which the config
	// loader reads as nesting.
	Properties []TableProperty `json:"properties,omitempty"`
}

// TableProperty is one Iceberg table property.
type TableProperty struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// The partition transforms of tables[].iceberg.partition_by, by the name a config writes.
const (
	TransformIdentity = "identity"
	TransformBucket   = "bucket"
	TransformTruncate = "truncate"
	TransformYear     = "year"
	TransformMonth    = "month"
	TransformDay      = "day"
	TransformHour     = "hour"
)

const transformList = "a column name, bucket(N, col), truncate(W, col), year(col), month(col), day(col) or hour(col)"

// PartitionField is one parsed entry of partition_by, or the expression of a sort_by entry.
type PartitionField struct {
	Transform string // one of the Transform* names
	Param     int    // N of bucket, W of truncate; 0 otherwise
	Column    string // the source column's name as Postgres stores it
}

// IcebergTransform is the field's transform in Iceberg's text form: identity, bucket[16], day.
func (f PartitionField) IcebergTransform() string {
	if f.Param > 0 {
		return fmt.Sprintf("%s[%d]", f.Transform, f.Param)
	}
	return f.Transform
}

// String writes the field as a config would: day(created_at), bucket(16, id), id.
func (f PartitionField) String() string {
	switch {
	case f.Transform == TransformIdentity:
		return f.Column
	case f.Param > 0:
		return fmt.Sprintf("%s(%d, %s)", f.Transform, f.Param, f.Column)
	}
	return fmt.Sprintf("%s(%s)", f.Transform, f.Column)
}

// SortField is one parsed entry of sort_by.
type SortField struct {
	PartitionField      // the sorted expression (identity for a bare column)
	Descending     bool // desc; asc by default
	NullsFirst     bool // nulls first; the default follows the direction, as in Postgres (asc: last, desc: first)
}

// ParsePartitionField parses one partition_by entry.
func ParsePartitionField(s string) (PartitionField, error) {
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '(')
	if open < 0 || !strings.HasSuffix(s, ")") || strings.HasPrefix(s, `"`) {
		col, err := batch.ParseIdent(s)
		if err != nil {
			return PartitionField{}, fmt.Errorf("%q is not a column or a transform: %v; write %s", s, err, transformList)
		}
		return PartitionField{Transform: TransformIdentity, Column: col}, nil
	}
	name, args := strings.ToLower(strings.TrimSpace(s[:open])), strings.TrimSpace(s[open+1:len(s)-1])
	param := ""
	if i := strings.IndexByte(name, '['); i >= 0 && strings.HasSuffix(name, "]") {
		name, param = name[:i], name[i+1:len(name)-1]
	}
	name = strings.TrimSuffix(name, "s") // years, months, days, hours as Spark writes them
	switch name {
	case TransformIdentity, TransformYear, TransformMonth, TransformDay, TransformHour:
		if param != "" {
			return PartitionField{}, fmt.Errorf("%q: %s takes no parameter; write %s(col)", s, name, name)
		}
		col, err := batch.ParseIdent(args)
		if err != nil {
			return PartitionField{}, fmt.Errorf("%q: %v; write %s(col)", s, err, name)
		}
		return PartitionField{Transform: name, Column: col}, nil
	case TransformBucket, TransformTruncate:
	default:
		return PartitionField{}, fmt.Errorf("%q: unknown transform %q; write %s", s, s[:open], transformList)
	}
	what := map[string]string{TransformBucket: "a number of buckets N", TransformTruncate: "a width W"}[name]
	col := args
	if param == "" {
		comma := strings.IndexByte(args, ',')
		if comma < 0 {
			return PartitionField{}, fmt.Errorf("%q: %s needs %s; write %s(N, col)", s, name, what, name)
		}
		param, col = strings.TrimSpace(args[:comma]), strings.TrimSpace(args[comma+1:])
	}
	n, err := strconv.Atoi(param)
	if err != nil || n < 1 {
		return PartitionField{}, fmt.Errorf("%q: %s needs %s of at least 1, not %q", s, name, what, param)
	}
	if name == TransformBucket && n > MaxPartitionBuckets {
		return PartitionField{}, fmt.Errorf("%q: use at most %d buckets: %s", s, MaxPartitionBuckets, whyBuckets)
	}
	c, err := batch.ParseIdent(col)
	if err != nil {
		return PartitionField{}, fmt.Errorf("%q: %v; write %s(N, col)", s, err, name)
	}
	return PartitionField{Transform: name, Param: n, Column: c}, nil
}

// ParseSortField parses one sort_by entry: an expression as partition_by writes it, then
// optionally asc or desc, then optionally nulls first or nulls last.
func ParseSortField(s string) (SortField, error) {
	words := strings.Fields(s)
	var f SortField
	nulls := ""
	if n := len(words); n >= 2 && strings.EqualFold(words[n-2], "nulls") {
		nulls = strings.ToLower(words[n-1])
		if nulls != "first" && nulls != "last" {
			return SortField{}, fmt.Errorf("%q: write nulls first or nulls last", s)
		}
		words = words[:n-2]
	}
	if n := len(words); n >= 1 {
		switch strings.ToLower(words[n-1]) {
		case "asc":
			words = words[:n-1]
		case "desc":
			f.Descending = true
			words = words[:n-1]
		}
	}
	f.NullsFirst = f.Descending
	if nulls != "" {
		f.NullsFirst = nulls == "first"
	}
	expr := strings.Join(words, " ")
	if expr == "" {
		return SortField{}, fmt.Errorf("%q names no column; write a column such as created_at desc", s)
	}
	pf, err := ParsePartitionField(expr)
	if err != nil {
		return SortField{}, err
	}
	f.PartitionField = pf
	return f, nil
}

// joinFlowSplits rejoins entries that a YAML flow sequence split at the comma inside a transform:
// [day(ts), bucket(16, id)] reads as "day(ts)", "bucket(16", "id)", which become "day(ts)",
// "bucket(16, id)". first[i] is the index of the written entry the i-th result starts at.
func joinFlowSplits(list []string) (out []string, first []int) {
	depth := 0
	for i, e := range list {
		if depth > 0 {
			out[len(out)-1] += ", " + strings.TrimSpace(e)
		} else {
			out = append(out, e)
			first = append(first, i)
		}
		depth += strings.Count(e, "(") - strings.Count(e, ")")
		depth = max(depth, 0)
	}
	return out, first
}

// PartitionFields returns the parsed partition_by entries (Validate has checked them).
func (t *TableIceberg) PartitionFields() ([]PartitionField, error) {
	entries, _ := joinFlowSplits(t.PartitionBy)
	out := make([]PartitionField, 0, len(entries))
	for _, e := range entries {
		f, err := ParsePartitionField(e)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// SortFields returns the parsed sort_by entries (Validate has checked them).
func (t *TableIceberg) SortFields() ([]SortField, error) {
	entries, _ := joinFlowSplits(t.SortBy)
	out := make([]SortField, 0, len(entries))
	for _, e := range entries {
		f, err := ParseSortField(e)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// reservedProperty says why a table property may not be set in tables[].iceberg.properties, or
// "" when it may.
func reservedProperty(key string) string {
	switch {
	case key == "format-version":
		return "the sink creates format version 2 tables (equality deletes need it)"
	case strings.HasPrefix(key, "sluice."):
		return "the sink keeps its own state in sluice.* properties"
	case key == "write.delete.mode" || key == "write.update.mode" || key == "write.merge.mode":
		return "the sink sets merge-on-read so that other engines writing the table do not copy-on-write over its equality deletes"
	}
	return ""
}

// tableIceberg checks one table's iceberg section. The columns and their types are checked
// against the source when the table starts (the sink's EnsureTable).
func (v *validator) tableIceberg(path string, t Table, sinkType string) {
	ice := t.Iceberg
	if ice == nil {
		return
	}
	if sinkType != SinkIceberg && sinkType != "" {
		v.ps.add(path, "applies only to sink.type iceberg (this pipeline's sink is %s); remove it", sinkType)
		return
	}
	included := t.IncludedColumns()
	seen := map[string]int{}
	entries, first := joinFlowSplits(ice.PartitionBy)
	for n, e := range entries {
		i := first[n]
		p := fmt.Sprintf("%s.partition_by[%d]", path, i)
		f, err := ParsePartitionField(e)
		if err != nil {
			v.ps.add(p, "%v", err)
			continue
		}
		key := f.IcebergTransform() + "(" + f.Column + ")"
		if j, dup := seen[key]; dup {
			v.ps.add(p, "%q repeats %s.partition_by[%d]; list each partition field once", e, path, j)
			continue
		}
		seen[key] = i
		v.replicatedColumn(p, f.Column, included, t.ExcludedColumns())
	}
	entries, first = joinFlowSplits(ice.SortBy)
	for n, e := range entries {
		p := fmt.Sprintf("%s.sort_by[%d]", path, first[n])
		f, err := ParseSortField(e)
		if err != nil {
			v.ps.add(p, "%v", err)
			continue
		}
		v.replicatedColumn(p, f.Column, included, t.ExcludedColumns())
	}
	keys := map[string]int{}
	for i, prop := range ice.Properties {
		p := fmt.Sprintf("%s.properties[%d]", path, i)
		if !v.required(p+".key", prop.Key, "name the Iceberg table property, such as write.metadata.previous-versions-max") {
			continue
		}
		if j, dup := keys[prop.Key]; dup {
			v.ps.add(p+".key", "%s is already set by %s.properties[%d]", prop.Key, path, j)
			continue
		}
		keys[prop.Key] = i
		if why := reservedProperty(prop.Key); why != "" {
			v.ps.add(p+".key", "%s cannot be set: %s; remove it", prop.Key, why)
		}
	}
}

// replicatedColumn reports a partition or sort column that a column list leaves out.
func (v *validator) replicatedColumn(path, col string, included, excluded []string) {
	switch {
	case included != nil && !slices.Contains(included, col):
		v.ps.add(path, "column %s is not in the table's columns list; add it there or partition by a replicated column", col)
	case slices.Contains(excluded, col):
		v.ps.add(path, "column %s is in the table's exclude_columns; it is not replicated, so it cannot partition or sort the target", col)
	}
}
