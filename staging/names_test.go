package staging

import (
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

func TestObjectNameRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ref  BatchRef
	}{
		{"plain", ref("orders", 0x16B3748, 0x16B3800)},
		{"dots and spaces in names", func() BatchRef {
			r := ref("order lines.v2", 1, 2)
			r.Pipeline = "team/a.b"
			r.Table.Schema = "my.schema"
			return r
		}()},
		{"high LSN and odd slot", func() BatchRef {
			r := ref("t", 0xFFFF_FFFF_0000_0001, 0xFFFF_FFFF_FFFF_FFFF)
			r.Lo.Source.Slot, r.Hi.Source.Slot = "slot_with_underscores", "slot_with_underscores"
			r.Lo.Source.Timeline, r.Hi.Source.Timeline = 12, 12
			return r
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := objectName(tt.ref)
			if strings.Count(name, "/") != 3 {
				t.Fatalf("name %q does not have 4 parts", name)
			}
			got, err := parseObjectName(name)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.ref
			want.Rows, want.Phase = 0, ""
			if got != want {
				t.Fatalf("round trip of %q = %+v, want %+v", name, got, want)
			}
		})
	}
}

func TestObjectNamesSortInPositionOrder(t *testing.T) {
	t.Parallel()
	positions := []batch.Position{
		{LSN: 0x9, Seq: 0xFFFF_FFFF},
		{LSN: 0xA, Seq: 0},
		{LSN: 0xA, Seq: 1},
		{LSN: 0x1_0000_0000, Seq: 0},
		{LSN: 0xFFFF_0000_0000_0000, Seq: 2},
	}
	for i := 1; i < len(positions); i++ {
		a, b := positionHex(positions[i-1]), positionHex(positions[i])
		if a >= b {
			t.Errorf("name of %s (%s) does not sort before %s (%s)", positions[i-1], a, positions[i], b)
		}
	}
}
