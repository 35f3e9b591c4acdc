package config

import (
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

func TestDefaultSlotName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"demo":           "sluice_demo",
		"orders-to-lake": "sluice_orders_to_lake",
		"a_b-c":          "sluice_a_b_c",
	} {
		if got := DefaultSlotName(in); got != want || !batch.ValidSlotName(got) {
			t.Errorf("DefaultSlotName(%q) = %q, want %q", in, got, want)
		}
	}
	// The longest allowed pipeline name still gives a slot name Postgres accepts.
	if n := len(DefaultSlotName(strings.Repeat("p", maxPipelineLen))); n != batch.MaxNameLen {
		t.Errorf("longest default slot name has %d bytes, want %d", n, batch.MaxNameLen)
	}
}
