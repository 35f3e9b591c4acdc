package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/workflows"
)

// TestWorkerConfigIsTheOnlyAuthority starts SourceWorkflows by hand (as anyone who can reach
// the task queue could) naming a table, a slot and a target that the worker's config does not
// hold: each fails, not retried, naming what it refused, and nothing is copied (no table
// workflow, no slot, no target). The configured pipeline then runs as usual.
func TestWorkerConfigIsTheOnlyAuthority(t *testing.T) {
	defer parallel(t)()
	p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, 300),
		`CREATE TABLE public.secrets (id int PRIMARY KEY, card text)`, `INSERT INTO public.secrets VALUES (1, '4111-1111')`)
	p.worker("worker")
	secrets := batch.TableName{Schema: "public", Name: "secrets"}

	configured := pipeline.SourceInput(p.cfg)
	unconfigured := configured
	t0 := pipeline.TableConfig(p.cfg, p.cfg.Tables[0]) // the starter's input lists no tables: a hand-made one does

	t0.Spec.Schema.Table = secrets
	t0.Spec.Target = "raw.secrets"
	unconfigured.Tables = []activities.TableConfig{t0}
	otherSlot := configured
	otherSlot.Slot = "sluice_evil"
	otherTarget := configured
	t1 := pipeline.TableConfig(p.cfg, p.cfg.Tables[0])
	t1.Spec.Target = "exfil.items"
	otherTarget.Tables = []activities.TableConfig{t1}

	cases := []struct {
		name string
		in   workflows.SourceInput
		want string
	}{
		{"unconfigured table", unconfigured, "table public.secrets is not in this worker's config"},
		{"unconfigured slot", otherSlot, `replication slot "sluice_evil"`},
		{"unconfigured target", otherTarget, `target "exfil.items"`},
	}
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		run, err := p.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:        workflows.SourceWorkflowID(p.name) + "-by-hand-" + strings.ReplaceAll(c.name, " ", "-"),
			TaskQueue: p.cfg.Temporal.TaskQueue,
		}, workflows.SourceWorkflowType, c.in)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		err = run.Get(ctx, nil)
		cancel()
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != failure.NotConfigured {
			t.Fatalf("%s: the workflow ended with %v, want a %s failure", c.name, err, failure.NotConfigured)
		}
		if !strings.Contains(appErr.Error(), c.want) {
			t.Errorf("%s: the failure %q does not name what was refused (%q)", c.name, appErr.Error(), c.want)
		}
	}

	// Nothing was copied: no workflow for the secrets table, no slot sluice_evil, no targets.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.temporal.DescribeWorkflowExecution(ctx, workflows.TableWorkflowID(p.name, secrets), "")
	var notFound *serviceerror.NotFound
	if !errors.As(err, &notFound) {
		t.Errorf("the secrets table has a workflow (describe: %v); want none", err)
	}
	var slots int
	if err := p.queryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sluice_evil'`, &slots); err != nil {
		t.Fatal(err)
	}
	if slots != 0 {
		t.Errorf("slot sluice_evil exists; want it never created")
	}
	sink := p.icebergSink()
	for _, target := range []string{"raw.secrets", "exfil.items"} {
		ns, name, _ := strings.Cut(target, ".")
		exists, err := sink.Catalog().CheckTableExists(ctx, table.Identifier{ns, name})
		if err != nil {
			t.Fatalf("looking up %s in the catalog: %v", target, err)
		}
		if exists {
			t.Errorf("target %s exists; want nothing created", target)
		}
	}

	// The configured pipeline runs as usual on the same worker.
	p.sluice("start")
	p.waitEqual("public.items", "raw.items", "id", itemColumns)
}
