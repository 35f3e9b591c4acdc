package tests

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sluicecdc/sluice/activities"
	"github.com/sluicecdc/sluice/staging"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/workflows"
)

// resurrectKey is the key inserted, deleted, and then replayed as inserted.
const resurrectKey = 424242

// TestReplayedInsertCannotResurrect proves "Why a replayed insert cannot resurrect a deleted row"
// end to end on every sink and on both example plugins (issue 8, fault 5; issue 20). The table
// is paused, key K is inserted, and the insert's batch file is read from staging while it waits
// (the file is removed once committed); the table resumes and commits the insert; K is deleted
// and the delete commits. Then the insert's batch is staged again under its old name and its old
// BatchRef is signalled to the table's workflow, exactly as a redelivery would deliver it. The workflow's history shows CommitBatch ran
// on that ref after the signal and returned Skipped (the sink's position covers it), the file is
// acknowledged, the committed position does not move, K stays deleted and the sink still equals
// the source key by key.
func TestReplayedInsertCannotResurrect(t *testing.T) {
	defer parallel(t)()
	const seed = 200
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (*icebergPipeline, sinkReader)
	}{
		{"iceberg", func(t *testing.T) (*icebergPipeline, sinkReader) {
			p := newIcebergPipeline(t, "", []string{"public.items:raw.items"}, itemsDDL, itemsSeed(1, seed))
			return p, func(ctx context.Context) (localrun.Table, error) {
				got, err := localrun.ScanIceberg(ctx, p.cfg, "raw.items", "id", append([]string{"id"}, e2eColumns...))
				out := localrun.Table{Columns: e2eColumns, Rows: map[string][]string{}}
				for k, r := range got.Rows {
					out.Rows[k] = r[1:]
				}
				return out, err
			}
		}},
		{"clickhouse", func(t *testing.T) (*icebergPipeline, sinkReader) {
			return clickhousePipeline(t, itemsDDL, itemsSeed(1, seed))
		}},
		{"couchbase", func(t *testing.T) (*icebergPipeline, sinkReader) {
			return couchbasePipeline(t, append(keys([2]int{1, seed}), fmt.Sprint(resurrectKey)), itemsDDL, itemsSeed(1, seed))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer parallel(t)()
			p, read := tc.open(t)
			replayInsertAfterDelete(t, p, read)
		})
	}
	for _, kind := range pluginSinks() {
		t.Run("plugin-"+kind.name, func(t *testing.T) {
			defer parallel(t)()
			dest := kind.start(t).dest
			target := dest.target("items")
			p := newPipeline(t, "", dest.yaml, []string{"public.items:" + target}, itemsDDL, itemsSeed(1, seed))
			replayInsertAfterDelete(t, p, dest.read(p, target, e2eColumns, nil))
		})
	}
}

// replayInsertAfterDelete runs the scenario of TestReplayedInsertCannotResurrect on p.
func replayInsertAfterDelete(t *testing.T, p *icebergPipeline, read sinkReader) {
	ctx := context.Background()
	p.worker("worker")
	p.sluice("start")
	p.waitStream(itemsTable)
	p.waitEqualTo("public.items", "id", e2eColumns, read)

	store, err := staging.Open(ctx, p.cfg.Staging.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })

	// Hold the table so the insert's batch stays staged long enough to keep a copy of it.
	p.sluice("pause", "--table", itemsTable.String())
	p.waitStatus("the table to be paused", func(st workflows.TableStatus) bool { return st.Paused })
	before := p.currentLSN(ctx)
	p.exec(fmt.Sprintf(`INSERT INTO public.items (id, name, qty) VALUES (%d, 'resurrect-me', 7)`, resurrectKey))
	var insertRef staging.BatchRef
	err = localrun.WaitFor(ctx, "the insert's batch to be staged", 2*time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			refs, err := store.List(ctx, p.name, itemsTable)
			if err != nil {
				return false, "", err
			}
			for _, r := range refs {
				if r.Lo.Position.LSN > before && r.Rows > 0 {
					insertRef = r
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d staged batches", len(refs)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := store.ReadAll(ctx, insertRef)
	if err != nil {
		t.Fatalf("keeping a copy of %s: %v", insertRef, err)
	}
	t.Logf("kept a copy of the insert's batch %s (%d rows, %d bytes)", insertRef, insertRef.Rows, len(kept))
	p.sluice("resume", "--table", itemsTable.String())
	p.waitEqualTo("public.items", "id", e2eColumns, read)

	p.exec(fmt.Sprintf(`DELETE FROM public.items WHERE id = %d`, resurrectKey))
	p.waitEqualTo("public.items", "id", e2eColumns, read)
	// Wait until the delete's batch is committed (the position passes the insert's hi) and its
	// file acknowledged, so the replay meets a sink that holds the delete.
	var deleted workflows.TableStatus
	p.waitStatus("the delete to commit", func(st workflows.TableStatus) bool {
		c, err := st.Position.Compare(insertRef.Hi)
		deleted = st
		return st.HasPosition && err == nil && c > 0 && st.QueueLength == 0
	})

	// The redelivery: the same file under the same name, and the same ref signalled again.
	replayed, err := store.Put(ctx, insertRef, bytes.NewReader(kept))
	if err != nil {
		t.Fatal(err)
	}
	if replayed.URI != insertRef.URI {
		t.Fatalf("the replayed batch is staged at %s, the original was at %s", replayed.URI, insertRef.URI)
	}
	signalled := time.Now()
	id := workflows.TableWorkflowID(p.name, itemsTable)
	if err := p.temporal.SignalWorkflow(ctx, id, "", workflows.SignalBatch, insertRef); err != nil {
		t.Fatalf("signalling the replayed batch: %v", err)
	}
	err = localrun.WaitFor(ctx, "the replayed batch to be acknowledged", 2*time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			refs, err := store.List(ctx, p.name, itemsTable)
			if err != nil {
				return false, "", err
			}
			for _, r := range refs {
				if r.URI == insertRef.URI {
					return false, "still staged", nil
				}
			}
			return true, "", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	res := replayedCommit(t, p.temporal, id, insertRef, signalled)
	if !res.Skipped || res.Rows != 0 {
		t.Fatalf("CommitBatch of the replayed insert returned %+v; want it skipped with no rows applied", res)
	}
	t.Logf("replayed %s: CommitBatch skipped it (position %s, dropped %d rows)", insertRef, res.Position, res.Dropped)

	p.waitEqualTo("public.items", "id", e2eColumns, read)
	got, err := read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, back := got.Rows[fmt.Sprint(resurrectKey)]; back {
		t.Fatalf("key %d is back in the sink after its insert was replayed", resurrectKey)
	}
	after := p.waitStatus("the status after the replay", func(workflows.TableStatus) bool { return true })
	if after.Position != deleted.Position {
		t.Fatalf("the committed position moved from %s to %s on the replay of a covered batch", deleted.Position, after.Position)
	}
}

// waitStatus waits until ok accepts the status of the pipeline's items table and returns it.
func (p *icebergPipeline) waitStatus(what string, ok func(workflows.TableStatus) bool) workflows.TableStatus {
	p.t.Helper()
	var st workflows.TableStatus
	err := localrun.WaitFor(context.Background(), what, 2*time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			var err error
			if st, err = localrun.TableStatus(ctx, p.temporal, p.name, itemsTable, p.started); err != nil {
				return false, "", err
			}
			return ok(st), fmt.Sprintf("%+v", st), nil
		})
	if err != nil {
		p.t.Fatal(err)
	}
	return st
}

// replayedCommit finds, in the history of the workflow's current run, the CommitBatch activity
// scheduled for ref after since, and returns its result.
func replayedCommit(t *testing.T, c client.Client, id string, ref staging.BatchRef, since time.Time) activities.CommitBatchResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dc := converter.GetDefaultDataConverter()
	scheduled := map[int64]bool{}
	var res activities.CommitBatchResult
	found := false
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("reading the history of %s: %v", id, err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "CommitBatch" &&
			!ev.GetEventTime().AsTime().Before(since) {
			var in activities.CommitBatchInput
			if err := dc.FromPayloads(a.GetInput(), &in); err != nil {
				t.Fatalf("decoding a CommitBatch input: %v", err)
			}
			if in.Ref.URI == ref.URI && in.Ref.Hi == ref.Hi {
				scheduled[ev.GetEventId()] = true
			}
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] {
			if err := dc.FromPayloads(a.GetResult(), &res); err != nil {
				t.Fatalf("decoding a CommitBatch result: %v", err)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("no CommitBatch of the replayed batch %s completed in the history of %s after the signal", ref, id)
	}
	return res
}
