package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePartitionField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want PartitionField
		err  string
	}{
		{"id", PartitionField{Transform: TransformIdentity, Column: "id"}, ""},
		{`"Created At"`, PartitionField{Transform: TransformIdentity, Column: "Created At"}, ""},
		{"day(created_at)", PartitionField{Transform: TransformDay, Column: "created_at"}, ""},
		{"days(created_at)", PartitionField{Transform: TransformDay, Column: "created_at"}, ""},
		{"HOUR( ts )", PartitionField{Transform: TransformHour, Column: "ts"}, ""},
		{"bucket(16, id)", PartitionField{Transform: TransformBucket, Param: 16, Column: "id"}, ""},
		{"bucket[16](id)", PartitionField{Transform: TransformBucket, Param: 16, Column: "id"}, ""},
		{"truncate(4, name)", PartitionField{Transform: TransformTruncate, Param: 4, Column: "name"}, ""},
		{"identity(region)", PartitionField{Transform: TransformIdentity, Column: "region"}, ""},
		{"bucket(2000, id)", PartitionField{}, "use at most 1024 buckets"},
		{"week(ts)", PartitionField{}, `unknown transform "week"`},
		{"day(a, b)", PartitionField{}, "write day(col)"},
	} {
		got, err := ParsePartitionField(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePartitionField(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParsePartitionField(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestSortFields(t *testing.T) {
	t.Parallel()
	ice := TableIceberg{SortBy: []string{"created_at desc", "id", "day(ts) asc nulls first", "bucket(4", "id) desc nulls last"}}
	got, err := ice.SortFields()
	if err != nil {
		t.Fatal(err)
	}
	want := []SortField{
		{PartitionField{TransformIdentity, 0, "created_at"}, true, true},
		{PartitionField{TransformIdentity, 0, "id"}, false, false},
		{PartitionField{TransformDay, 0, "ts"}, false, true},
		{PartitionField{TransformBucket, 4, "id"}, true, false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SortFields = %+v\nwant %+v", got, want)
	}
}
