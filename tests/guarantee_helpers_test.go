package tests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/iceberg"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/workflows"
)

// icebergSink opens the pipeline's Iceberg sink as an operator's tool would (the same catalog
// and warehouse the workers use); it is closed at cleanup.
func (p *icebergPipeline) icebergSink() *iceberg.Sink {
	p.t.Helper()
	s, err := pipeline.Open(context.Background(), p.cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = s.Close(context.Background()) })
	sink, ok := s.(*iceberg.Sink)
	if !ok {
		p.t.Fatalf("sink %s is not iceberg", p.cfg.Sink.Type)
	}
	return sink
}

// sinkPosition reads the committed position the sink holds for target.
func (p *icebergPipeline) sinkPosition(ctx context.Context, sink *iceberg.Sink, target string) (batch.SourcePosition, bool) {
	p.t.Helper()
	pos, ok, err := sink.Position(ctx, sinks.TableSpec{Target: target})
	if err != nil {
		p.t.Fatalf("reading the committed position of %s: %v", target, err)
	}
	return pos, ok
}

// icebergTable loads target from the sink's catalog.
func (p *icebergPipeline) icebergTable(ctx context.Context, sink *iceberg.Sink, target string) *table.Table {
	p.t.Helper()
	ns, name, _ := strings.Cut(target, ".")
	tbl, err := sink.Catalog().LoadTable(ctx, table.Identifier{ns, name})
	if err != nil {
		p.t.Fatalf("loading iceberg table %s: %v", target, err)
	}
	return tbl
}

// waitTableFailed waits until the latest run of table's workflow is closed as failed and
// returns its failure.
func (p *icebergPipeline) waitTableFailed(tn batch.TableName) *temporal.ApplicationError {
	p.t.Helper()
	id := workflows.TableWorkflowID(p.name, tn)
	var appErr *temporal.ApplicationError
	err := localrun.WaitFor(context.Background(), "workflow "+id+" to fail", 2*time.Minute, 500*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			werr, err := p.failedRunError(ctx, tn)
			if err != nil || werr == nil {
				return false, "its latest run has not failed", err
			}
			if !errors.As(werr, &appErr) {
				return false, "", fmt.Errorf("failed run of %s ended with %v, not an application error", id, werr)
			}
			return true, "", nil
		})
	if err != nil {
		p.t.Fatal(err)
	}
	return appErr
}

// failedRunError returns the error table tn's latest run failed with, or nil when that run has
// not failed (it runs, or ended otherwise).
func (p *icebergPipeline) failedRunError(ctx context.Context, tn batch.TableName) (error, error) {
	id := workflows.TableWorkflowID(p.name, tn)
	desc, err := p.temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, err
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		return nil, nil
	}
	return p.temporal.GetWorkflow(ctx, id, "").Get(ctx, nil), nil
}

// workerPID is the process id in a Temporal worker identity (pid@host@...).
func workerPID(identity string) (int, error) {
	n, _, _ := strings.Cut(identity, "@")
	return strconv.Atoi(n)
}

// currentLSN returns the source's current WAL position.
func (p *icebergPipeline) currentLSN(ctx context.Context) uint64 {
	p.t.Helper()
	var lsn uint64
	if err := p.queryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`, &lsn); err != nil {
		p.t.Fatal(err)
	}
	return lsn
}

// queryRow runs one query on the source and scans its row into dst.
func (p *icebergPipeline) queryRow(ctx context.Context, sql string, dst ...any) error {
	return sourceDBs.QueryRow(ctx, p.dsn, sql, nil, dst...)
}

// readerPID returns the process id of the worker that runs the pipeline's ReadStream activity
// (from the pending activity's last worker identity, pid@host@), waiting until one runs.
func (p *icebergPipeline) readerPID() int {
	p.t.Helper()
	id := workflows.SourceWorkflowID(p.name)
	var pid int
	err := localrun.WaitFor(context.Background(), "the reader to run", time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			desc, err := p.temporal.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				return false, "", err
			}
			for _, a := range desc.GetPendingActivities() {
				if a.GetActivityType().GetName() != "ReadStream" || a.GetLastWorkerIdentity() == "" {
					continue
				}
				pid, err = workerPID(a.GetLastWorkerIdentity())
				return err == nil && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED, a.GetState().String(), err
			}
			return false, "no ReadStream activity pending", nil
		})
	if err != nil {
		p.t.Fatal(err)
	}
	return pid
}

// notReader returns the worker of ws that does not run the reader.
func (p *icebergPipeline) notReader(ws ...*localrun.Worker) *localrun.Worker {
	p.t.Helper()
	reader := p.readerPID()
	for _, w := range ws {
		if w.PID() != reader {
			return w
		}
	}
	p.t.Fatalf("every worker runs the reader (pid %d)?", reader)
	return nil
}
