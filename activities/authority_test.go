package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/staging"
)

func TestAuthority(t *testing.T) {
	t.Parallel()
	cfg := &Authority{Pipeline: "p1", Slot: "s1", Publication: "pub1", Sink: SinkRef{Name: "lake"}, Tables: []TableConfig{testTable}}
	other := func(edit func(*TableConfig)) TableConfig {
		t := testTable
		edit(&t)
		return t
	}
	tests := []struct {
		name      string
		auth      *Authority
		pipeline  string
		slot, pub string
		tables    []TableConfig
		want      string // in the refusal; empty: allowed
	}{
		{"the config's own", cfg, "p1", "", "", []TableConfig{testTable}, ""},
		{"the config's slot and publication named", cfg, "p1", "s1", "pub1", []TableConfig{testTable}, ""},
		{"another pipeline", cfg, "p2", "", "", nil, `pipeline "p2"`},
		{"another slot", cfg, "p1", "evil", "", nil, `replication slot "evil"`},
		{"another publication", cfg, "p1", "", "evil", nil, `publication "evil"`},
		{"an unconfigured table", cfg, "p1", "", "", []TableConfig{other(func(t *TableConfig) { t.Spec.Schema.Table = batch.TableName{Schema: "public", Name: "secrets"} })}, "table public.secrets is not in this worker's config"},
		{"another target", cfg, "p1", "", "", []TableConfig{other(func(t *TableConfig) { t.Spec.Target = "exfil.orders" })}, `target "exfil.orders"`},
		{"another sink", cfg, "p1", "", "", []TableConfig{other(func(t *TableConfig) { t.Sink = SinkRef{Name: "clickhouse"} })}, `sink "clickhouse"`},
		{"a table of another pipeline", cfg, "p1", "", "", []TableConfig{other(func(t *TableConfig) { t.Pipeline = "p2" })}, `pipeline "p2"`},
		{"no config", nil, "p1", "", "", nil, "no pipeline config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := toTemporal(tt.auth.CheckSource(tt.pipeline, tt.slot, tt.pub, tt.tables))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != failure.NotConfigured || !appErr.NonRetryable() {
				t.Fatalf("got %v, want a non-retryable %s error", err, failure.NotConfigured)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("the refusal %q does not name %q", err, tt.want)
			}
		})
	}
}

// TestCommitBatchOfAnotherPipelineRefused gives a worker of pipeline p1 a staged batch of
// pipeline p2 (two pipelines sharing a task queue): it is refused, not retried, and nothing
// reaches the sink or leaves staging.
func TestCommitBatchOfAnotherPipelineRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := staging.OpenDir(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	theirs := testTable
	theirs.Pipeline = "p2"
	ref := stageRows(t, st, sp(100, 0), sp(200, 5), 100, 150, 200)
	ref.Pipeline = "p2"
	sink := &fakeSink{}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&Commit{Authority: testAuthority, Sinks: oneSink{sink}, Staging: st, HeartbeatEvery: time.Millisecond})
	for _, name := range []string{"CommitBatch", "EnsureTable", "LoadTable", "MaintainTable"} {
		var in any = theirs
		if name == "CommitBatch" {
			in = CommitBatchInput{Table: theirs, Ref: ref}
		}
		_, err := env.ExecuteActivity(name, in)
		checkErr(t, err, failure.NotConfigured, []string{`pipeline "p2"`, `pipeline "p1"`})
	}
	if len(sink.applied) != 0 {
		t.Errorf("the sink got %d applies, want none", len(sink.applied))
	}
}

// TestTableRemovedFromConfig: a table's own activity for a table of the pipeline that the config
// no longer lists is TableRemoved (its workflow ends cleanly), while the same table in a
// SourceWorkflow's input stays NotConfigured, and another target stays NotConfigured too.
func TestTableRemovedFromConfig(t *testing.T) {
	t.Parallel()
	cfg := &Authority{Pipeline: "p1", Slot: "s1", Publication: "pub1", Sink: SinkRef{Name: "lake"}, Tables: []TableConfig{testTable}}
	removed := testTable
	removed.Spec.Schema.Table = batch.TableName{Schema: "public", Name: "gone"}
	retargeted := testTable
	retargeted.Spec.Target = "exfil.orders"
	tests := []struct {
		name   string
		check  func() error
		want   string
		wantIn []string
	}{
		{"table activity, unlisted table", func() error { return cfg.CheckTable(removed) }, failure.TableRemoved, []string{"public.gone", "sluice remove --table public.gone"}},
		{"source activity, unlisted table", func() error { return cfg.CheckSource("p1", "", "", []TableConfig{removed}) }, failure.NotConfigured, []string{"public.gone"}},
		{"table activity, another target", func() error { return cfg.CheckTable(retargeted) }, failure.NotConfigured, []string{`target "exfil.orders"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkErr(t, toTemporal(tt.check()), tt.want, tt.wantIn)
		})
	}
	if !cfg.Lists(testTable.Table()) || cfg.Lists(removed.Table()) {
		t.Errorf("Lists: want the configured table listed and the removed one not")
	}
}
