package source

import (
	"log/slog"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/sluicecdc/sluice/batch"
)

// TestDecodeIdentityLost: a RELATION whose replica identity leaves out a key column is a
// SchemaEvent naming it, also at a run's first RELATION (a change made while stopped); an
// identity that carries the key, or none at all (Postgres then refuses UPDATE and DELETE), is
// no event.
func TestDecodeIdentityLost(t *testing.T) {
	t.Parallel()
	key, keyless := col("id", 23, true), col("id", 23, false)
	doc, docIdx := col("doc", 25, false), col("doc", 25, true)
	const lost = "replica identity USING INDEX, which does not carry key column id"
	tests := []struct {
		name string
		rels []*pglogrepl.RelationMessage
		want string // Identity of the last SchemaEvent ("" when none)
	}{
		{"default, first seen", []*pglogrepl.RelationMessage{relMsg(1, 'd', key, doc)}, ""},
		{"index without the key, first seen", []*pglogrepl.RelationMessage{relMsg(1, 'i', keyless, docIdx)}, lost},
		{"default to an index without the key", []*pglogrepl.RelationMessage{relMsg(1, 'd', key, doc), relMsg(1, 'i', keyless, docIdx)}, lost},
		{"full to an index without the key", []*pglogrepl.RelationMessage{relMsg(1, 'f', key, doc), relMsg(1, 'i', keyless, docIdx)}, lost},
		{"an index with the key", []*pglogrepl.RelationMessage{relMsg(1, 'd', key, doc), relMsg(1, 'i', key, docIdx)}, ""},
		{"default to nothing", []*pglogrepl.RelationMessage{relMsg(1, 'd', key, doc), relMsg(1, 'n', keyless, doc)}, ""},
		{"full to default on the key", []*pglogrepl.RelationMessage{relMsg(1, 'f', key, doc), relMsg(1, 'd', key, doc)}, ""},
		{"default to full", []*pglogrepl.RelationMessage{relMsg(1, 'd', key, doc), relMsg(1, 'f', key, doc)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDecoder(fakeResolve, []batch.Schema{knownSchema()}, slog.New(slog.DiscardHandler))
			msgs := []pglogrepl.Message{&pglogrepl.BeginMessage{FinalLSN: 10}}
			for _, r := range tt.rels {
				msgs = append(msgs, r)
			}
			evs, err := run(t, d, msgs...)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, ev := range evs {
				if e, ok := ev.(*SchemaEvent); ok {
					got = e.Identity
				}
			}
			if got != tt.want {
				t.Errorf("Identity = %q, want %q", got, tt.want)
			}
		})
	}
}
