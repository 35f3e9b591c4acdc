package bench

import (
	"strings"
	"testing"
)

func TestParseKept(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		doc     string
		want    map[string]string // block name to its text
		wantErr string
	}{
		{name: "no earlier report", doc: "", want: map[string]string{}},
		{name: "no blocks", doc: "# Benchmarks\n\ntext\n", want: map[string]string{}},
		{name: "two blocks, text around them dropped",
			doc:  "gen\n<!-- keep: a -->\nhand 1\n\nhand 2\n<!-- /keep: a -->\ngen\n<!-- keep: causes/iceberg/backfill -->\n1. slow\n<!-- /keep: causes/iceberg/backfill -->\n",
			want: map[string]string{"a": "hand 1\n\nhand 2", "causes/iceberg/backfill": "1. slow"}},
		{name: "an empty block", doc: "<!-- keep: a -->\n<!-- /keep: a -->\n", want: map[string]string{"a": ""}},
		{name: "CRLF line ends", doc: "<!-- keep: a -->\r\nx\r\n<!-- /keep: a -->\r\n", want: map[string]string{"a": "x"}},
		{name: "a marker inside a line is text", doc: "<!-- keep: a -->\nsee <!-- keep: b --> here\n<!-- /keep: a -->\n",
			want: map[string]string{"a": "see <!-- keep: b --> here"}},
		{name: "begin without end", doc: "<!-- keep: a -->\ntext\n", wantErr: `block "a" has no end marker`},
		{name: "end without begin", doc: "text\n<!-- /keep: a -->\n", wantErr: `end marker of block "a" without its begin marker`},
		{name: "end of another block", doc: "<!-- keep: a -->\n<!-- /keep: b -->\n", wantErr: `end marker of block "b"`},
		{name: "nested", doc: "<!-- keep: a -->\n<!-- keep: b -->\n<!-- /keep: b -->\n<!-- /keep: a -->\n", wantErr: `block "b" begins inside block "a"`},
		{name: "twice", doc: "<!-- keep: a -->\n<!-- /keep: a -->\n<!-- keep: a -->\n<!-- /keep: a -->\n", wantErr: `block "a" appears twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k, err := ParseKept(tc.doc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(k.blocks) != len(tc.want) {
				t.Fatalf("blocks %q, want %q", k.blocks, tc.want)
			}
			for name, text := range tc.want {
				if got, ok := k.blocks[name]; !ok || got != text {
					t.Errorf("block %q = %q (present %v), want %q", name, got, ok, text)
				}
			}
		})
	}
}

func TestKeptBlockRoundTrip(t *testing.T) {
	t.Parallel()
	k, err := ParseKept("<!-- keep: a -->\nhand-written\n<!-- /keep: a -->\n<!-- keep: gone -->\nold cause\n<!-- /keep: gone -->\n" +
		"<!-- keep: untouched -->\nplaceholder\n<!-- /keep: untouched -->\n<!-- keep: empty -->\n\n<!-- /keep: empty -->\n")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(k.Block("a", "placeholder"))
	b.WriteString(k.Block("new", "placeholder"))
	k.WriteUnused(&b, "placeholder")
	doc := b.String()
	for _, name := range []string{"untouched", "empty"} {
		if strings.Contains(doc, "<!-- keep: "+name+" -->") {
			t.Errorf("block %q, with nothing hand-written in it, was kept:\n%s", name, doc)
		}
	}
	for _, want := range []string{"<!-- keep: a -->\nhand-written\n<!-- /keep: a -->", "<!-- keep: new -->\nplaceholder\n<!-- /keep: new -->",
		"## Kept from earlier runs", "<!-- keep: gone -->\nold cause\n<!-- /keep: gone -->"} {
		if !strings.Contains(doc, want) {
			t.Errorf("written document lacks %q:\n%s", want, doc)
		}
	}
	if strings.Count(doc, "placeholder") != 1 {
		t.Errorf("the placeholder was written more than once:\n%s", doc)
	}
	again, err := ParseKept(doc)
	if err != nil {
		t.Fatalf("the written document does not parse: %v", err)
	}
	for name, want := range map[string]string{"a": "hand-written", "new": "placeholder", "gone": "old cause"} {
		if got := again.blocks[name]; got != want {
			t.Errorf("after a second parse, block %q = %q, want %q", name, got, want)
		}
	}
}
