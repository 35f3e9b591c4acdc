package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

// scriptedTables is a TableStarter whose EnsureTableWorkflow is a function field.
type scriptedTables struct {
	ensure func(ctx context.Context, t TableConfig) error
}

func (s scriptedTables) EnsureTableWorkflow(ctx context.Context, t TableConfig) error {
	return s.ensure(ctx, t)
}

func (s scriptedTables) SignalBatches(context.Context, TableConfig, []staging.BatchRef) error {
	return nil
}

func (s scriptedTables) Resync(context.Context, TableConfig) error { return nil }

// TestEnsureTableWorkflowsStartsEveryTableBoundedly: every table's workflow is ensured once,
// at most ensureWorkflowsAtOnce at a time, and a failure names its table.
func TestEnsureTableWorkflowsStartsEveryTableBoundedly(t *testing.T) {
	t.Parallel()
	tables := make([]TableConfig, 200)
	for i := range tables {
		tables[i].Pipeline, tables[i].Sink = "p1", SinkRef{Name: "lake"}
		tables[i].Spec.Schema.Table = batch.TableName{Schema: "public", Name: fmt.Sprintf("t%03d", i)}
	}
	auth := &Authority{Pipeline: "p1", Sink: SinkRef{Name: "lake"}, Tables: tables}
	for _, tt := range []struct {
		name    string
		fail    string // the table whose start fails
		wantErr string
	}{
		{name: "all started"},
		{name: "one fails", fail: "t117", wantErr: "ensuring workflow of table public.t117: no room"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			seen := map[string]int{}
			var running, peak atomic.Int64
			starter := scriptedTables{ensure: func(_ context.Context, tc TableConfig) error {
				n := running.Add(1)
				defer running.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				mu.Lock()
				seen[tc.Table().Name]++
				mu.Unlock()
				if tc.Table().Name == tt.fail {
					return errors.New("no room")
				}
				return nil
			}}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(&Setup{Tables: starter, Authority: auth})
			_, err := env.ExecuteActivity("EnsureTableWorkflows", tables)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range tables {
				if n := seen[tc.Table().Name]; n != 1 {
					t.Errorf("table %s ensured %d times, want once", tc.Table(), n)
				}
			}
			if p := peak.Load(); p > ensureWorkflowsAtOnce {
				t.Errorf("%d tables ensured at once, over %d", p, ensureWorkflowsAtOnce)
			}
		})
	}
}
