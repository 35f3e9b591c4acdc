package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

// keyPaths lists every key path of t as docs/config.md writes it, with [] for list entries.
func keyPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		key := jsonKey(f)
		if !f.IsExported() || key == "" || key == "-" {
			continue
		}
		p := joinKey(prefix, key)
		out = append(out, p)
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			p += "[]"
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(rawDecoderType) {
			out = append(out, keyPaths(ft, p)...)
		}
	}
	return out
}

// TestDocsCoverEveryKey keeps docs/config.md the complete reference: every key has a row.
func TestDocsCoverEveryKey(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range keyPaths(reflect.TypeFor[Config](), "") {
		// Sections described by their own table (catalog, s3 keys, maintenance) need no row.
		if !strings.Contains(string(doc), "| `"+p+"` |") && !strings.Contains(string(doc), "`"+p+".") {
			t.Errorf("docs/config.md has no reference row for %s", p)
		}
	}
	for _, name := range batch.MetadataNames() {
		if !strings.Contains(string(doc), "| `"+name+"` | `__"+name+"` |") {
			t.Errorf("docs/config.md does not describe the context column %s", name)
		}
	}
}

// TestDocsExamplesParse checks that the YAML blocks of docs/config.md are valid: the complete
// example as it stands, and each sink section in place of the complete example's sink.
func TestDocsExamplesParse(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 4 {
		t.Fatalf("docs/config.md has %d YAML blocks, want the complete example and 3 sink sections", len(blocks))
	}
	complete := blocks[0][1]
	c, err := parse(strings.NewReader(complete), "yaml", noEnv)
	if err != nil {
		t.Fatalf("the complete example does not load: %v", err)
	}
	if c.Sink.Iceberg == nil || len(c.Tables) != 2 || len(c.Tables[1].Metadata) != 4 {
		t.Errorf("the complete example lost settings: %s", mustJSON(t, c))
	}
	start := strings.Index(complete, "sink:\n")
	end := strings.Index(complete, "tables:\n")
	for _, b := range blocks[1:4] {
		variant := complete[:start] + b[1] + "\n" + complete[end:]
		variant = strings.ReplaceAll(variant, "target: raw.order_items", "target: order_items")
		variant = strings.ReplaceAll(variant, "target: raw.orders", "target: orders")
		if _, err := parse(strings.NewReader(variant), "yaml", noEnv); err != nil {
			t.Errorf("sink section does not load:\n%s\n%v", b[1], err)
		}
	}
}
