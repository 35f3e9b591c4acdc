package source

import (
	"strings"
	"testing"
)

func TestReplicationCapacity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		c          ReplicationCapacity
		configured int
		want       int    // Backfills
		wantDef    int    // DefaultParallelBackfills
		problem    string // in BackfillProblems(configured); "" none
	}{
		{"default server, pipeline running", ReplicationCapacity{MaxSlots: 10, MaxSenders: 10, Slots: 1, Senders: 1, PipelineSlot: true, PipelineActive: true},
			0, 9, 8, ""},
		{"default server, pipeline not created yet", ReplicationCapacity{MaxSlots: 10, MaxSenders: 10},
			0, 9, 8, ""},
		{"slot exists, reader not streaming", ReplicationCapacity{MaxSlots: 10, MaxSenders: 10, Slots: 1, PipelineSlot: true},
			0, 9, 8, ""},
		{"walsenders are the limit", ReplicationCapacity{MaxSlots: 20, MaxSenders: 5, Slots: 3, Senders: 2, PipelineSlot: true, PipelineActive: true},
			3, 3, 2, ""},
		{"slots are the limit", ReplicationCapacity{MaxSlots: 4, MaxSenders: 20, Slots: 3, Senders: 1, PipelineSlot: true, PipelineActive: true},
			0, 1, 1, ""},
		{"configured above what is free", ReplicationCapacity{MaxSlots: 10, MaxSenders: 10, Slots: 5, Senders: 5, PipelineSlot: true, PipelineActive: true},
			8, 5, 4, "is 8, but the server has room for 5 backfills"},
		{"nothing free", ReplicationCapacity{MaxSlots: 10, MaxSenders: 10, Slots: 10, Senders: 3, PipelineSlot: true, PipelineActive: true},
			0, 0, 1, "no replication slot or walsender free"},
		{"over-full server", ReplicationCapacity{MaxSlots: 2, MaxSenders: 2, Slots: 3, Senders: 3},
			1, 0, 1, "no replication slot or walsender free"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.c.Backfills(); got != tt.want {
				t.Errorf("Backfills() = %d, want %d", got, tt.want)
			}
			if got := tt.c.DefaultParallelBackfills(); got != tt.wantDef {
				t.Errorf("DefaultParallelBackfills() = %d, want %d", got, tt.wantDef)
			}
			ps := tt.c.BackfillProblems(tt.configured)
			switch {
			case tt.problem == "" && len(ps) > 0:
				t.Errorf("BackfillProblems(%d) = %v, want none", tt.configured, ps)
			case tt.problem != "" && (len(ps) != 1 || !strings.Contains(ps[0].Message, tt.problem)):
				t.Errorf("BackfillProblems(%d) = %v, want one saying %q", tt.configured, ps, tt.problem)
			}
		})
	}
}
