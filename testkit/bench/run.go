package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// SinkOptions are the workloads one sink's measurements run, and the limits they compare to.
type SinkOptions struct {
	Rows, Bulk, SmallTx int
	PgBin, DSN          string
	ChunkRows           int
	Rate                int
	LatencyFor          time.Duration
	CopyBytes           int64 // bytes of limit 1's COPY, for the backfill's MB/s
	Limit1, LimitBulk   string
	LimitSmall          string
	// SkipStream and SkipLatency leave out the stream workloads (and their restart row) and the
	// latency run, for quicker iterations on the backfill.
	SkipStream, SkipLatency bool
}

// workerWarmup lets a fresh worker connect and poll before the pipeline starts, so its start-up
// is not counted.
const workerWarmup = 2 * time.Second

// MeasureSink runs every Sluice measurement of one sink: the backfill of public.orders, a
// restart with a one-row marker (the fixed cost inside the stream figures), the bulk UPDATE and
// the single-row transactions consumed from the slot's backlog, and the latency at a fixed rate.
// Each stream workload runs while the pipeline is stopped, as limit 2's does before
// pg_recvlogical starts; the figure runs from `sluice start` until the table's committed position
// passes a marker transaction committed after the workload.
func MeasureSink(ctx context.Context, conn *pgx.Conn, p *Pipeline, t SinkTarget, o SinkOptions, log *slog.Logger) ([]Result, error) {
	var out []Result
	defer resetSink(ctx, conn, p, t)()
	log.Info("backfill", "sink", t.Kind, "rows", o.Rows)
	start, timeout, err := backfill(ctx, conn, p, o.Rows)
	if err != nil {
		return out, err
	}
	out = append(out, Result{Name: "sluice backfill into " + t.Kind, Rows: int64(o.Rows), Bytes: o.CopyBytes,
		Elapsed: time.Since(start), Limit: o.Limit1, Sink: t.Kind, Kind: KindBackfill, PeakRSS: p.WorkerPeakRSS(),
		Parallelism: p.Spec.SnapshotParallelism, Profiles: p.EndPhase(),
		Note: fmt.Sprintf("snapshot_chunk_rows %d%s; MB/s counts limit 1's COPY bytes", o.ChunkRows, parallelismNote(p.Spec.SnapshotParallelism))})
	if err := p.WaitStream(ctx, LatencyTable, start, time.Minute); err != nil {
		return out, err
	}
	if !o.SkipStream {
		res, err := measureStream(ctx, conn, p, t, o, timeout, log)
		out = append(out, res...)
		if err != nil {
			return out, err
		}
	}
	if o.SkipLatency {
		return out, nil
	}
	// A fresh worker, so that the latency run has its own peak RSS and profiles.
	if _, err := measureBacklog(ctx, conn, p, "restart before the latency run", 0, timeout, func(context.Context) error { return nil }); err != nil {
		return out, err
	}
	log.Info("latency", "sink", t.Kind, "rate", o.Rate, "for", o.LatencyFor)
	probe, err := t.OpenProbe(ctx, p.Config)
	if err != nil {
		return out, err
	}
	defer probe.Close()
	poll := 100 * time.Millisecond
	lat, err := MeasureLatency(ctx, conn, probe, o.Rate, o.LatencyFor, poll, 60*time.Second)
	if err != nil {
		return out, err
	}
	out = append(out, Result{Name: "sluice latency into " + t.Kind, Rows: lat.Rows, Elapsed: lat.Elapsed, Sink: t.Kind,
		Kind: KindLatency, Latency: &lat, PeakRSS: p.WorkerPeakRSS(), Profiles: p.EndPhase(),
		Note: fmt.Sprintf("p50 %s, p99 %s, max %s; asked %d rows/s; %d of %d rows seen; sink polled every %s",
			lat.P50.Round(time.Millisecond), lat.P99.Round(time.Millisecond), lat.Max.Round(time.Millisecond),
			lat.Requested, lat.Seen, lat.Rows, poll)})
	return out, nil
}

// resetSink clears what an earlier run left in the sink and the pipeline's slot, and returns
// the function that stops the pipeline and its worker and clears them again at the end.
func resetSink(ctx context.Context, conn *pgx.Conn, p *Pipeline, t SinkTarget) func() {
	t.Cleanup(ctx)
	_ = p.Stop(ctx)
	p.DropSlot(ctx, conn)
	return func() {
		cctx := context.WithoutCancel(ctx)
		_ = p.Stop(cctx)
		_ = p.StopWorker()
		p.DropSlot(cctx, conn)
		t.Cleanup(cctx)
	}
}

// backfill creates the latency table, vacuums public.orders (rows rows), starts a fresh worker
// and the pipeline, and waits until public.orders streams. It returns when `sluice start` was
// issued and the timeout it used, which the later phases of the sink reuse.
func backfill(ctx context.Context, conn *pgx.Conn, p *Pipeline, rows int) (time.Time, time.Duration, error) {
	if err := CreateLatencyTable(ctx, conn); err != nil {
		return time.Time{}, 0, err
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE public.orders"); err != nil {
		return time.Time{}, 0, fmt.Errorf("vacuuming public.orders: %w", err)
	}
	if err := p.StartWorker(); err != nil {
		return time.Time{}, 0, err
	}
	time.Sleep(workerWarmup)
	start, err := p.Start(ctx)
	if err != nil {
		return time.Time{}, 0, err
	}
	timeout := 10*time.Minute + time.Duration(rows/500)*time.Second
	return start, timeout, p.WaitStream(ctx, OrdersTable, start, timeout)
}

// measureStream measures the restart and the two stream workloads consumed from the backlog.
func measureStream(ctx context.Context, conn *pgx.Conn, p *Pipeline, t SinkTarget, o SinkOptions, timeout time.Duration,
	log *slog.Logger) ([]Result, error) {
	var out []Result

	restart, err := measureBacklog(ctx, conn, p, "restart with a 1-row marker", 0, timeout, func(context.Context) error { return nil })
	if err != nil {
		return out, err
	}
	restart.Sink, restart.Kind, restart.Name, restart.Profiles = t.Kind, KindRestart, "sluice restart, "+t.Kind, p.EndPhase()
	restart.Note = "sluice start to a 1-row marker committed: the fixed cost inside each stream figure"
	out = append(out, restart)

	log.Info("stream: bulk UPDATE", "sink", t.Kind, "rows", o.Bulk)
	bulk, err := measureBacklog(ctx, conn, p, "bulk", int64(o.Bulk), timeout, BulkUpdate(conn, o.Bulk))
	if err != nil {
		return out, err
	}
	bulk.Profiles = p.EndPhase()
	bulk.Name, bulk.Limit, bulk.Sink, bulk.Kind = "sluice stream into "+t.Kind+", bulk UPDATE in one transaction", o.LimitBulk, t.Kind, KindStreamBulk
	bulk.Overhead, bulk.Note = restart.Elapsed, "backlog consumed from sluice start, restart included; net: without the restart row's time"
	out = append(out, bulk)

	log.Info("stream: single-row transactions", "sink", t.Kind, "transactions", o.SmallTx)
	small, err := measureBacklog(ctx, conn, p, "small", int64(o.SmallTx), timeout, SmallTransactions(o.PgBin, o.DSN, o.SmallTx, o.Rows))
	if err != nil {
		return out, err
	}
	small.Profiles = p.EndPhase()
	small.Name, small.Limit, small.Sink, small.Kind = "sluice stream into "+t.Kind+", single-row UPDATE transactions", o.LimitSmall, t.Kind, KindStreamSmall
	small.Overhead, small.Note = restart.Elapsed, "backlog consumed from sluice start, restart included; net: without the restart row's time"
	out = append(out, small)
	return out, nil
}

// measureBacklog stops the pipeline and its worker, runs workload and a marker, starts a fresh
// worker and the pipeline, and measures from `sluice start` until orders commits the marker.
// The phase goes on in the worker: the caller ends it (EndPhase) once it has its figures.
func measureBacklog(ctx context.Context, conn *pgx.Conn, p *Pipeline, name string, rows int64, timeout time.Duration,
	workload func(context.Context) error) (Result, error) {
	if err := p.Stop(ctx); err != nil {
		return Result{}, err
	}
	if err := p.StopWorker(); err != nil {
		return Result{}, err
	}
	if err := workload(ctx); err != nil {
		return Result{}, fmt.Errorf("running workload %s: %w", name, err)
	}
	lsn, err := Marker(ctx, conn)
	if err != nil {
		return Result{}, err
	}
	if err := p.StartWorker(); err != nil {
		return Result{}, err
	}
	time.Sleep(workerWarmup)
	start, err := p.Start(ctx)
	if err != nil {
		return Result{}, err
	}
	if err := p.WaitPosition(ctx, OrdersTable, start, lsn, timeout); err != nil {
		return Result{}, err
	}
	return Result{Rows: rows + 1, Elapsed: time.Since(start), PeakRSS: p.WorkerPeakRSS()}, nil
}

// MemoryOptions are the two memory cases of one sink: a backfill of a large table and one large
// transaction streamed from the slot's backlog.
type MemoryOptions struct {
	Rows, Tx  int
	ChunkRows int
	// Limit1 names the COPY binary result the memory case's backfill is a ratio to.
	Limit1 string
}

// MeasureMemory runs the memory cases on public.orders, which the caller has filled with
// o.Rows rows: the backfill of the whole table, then an UPDATE of o.Tx rows in one transaction
// consumed from the backlog after a restart. Each runs in a fresh worker process, whose peak RSS
// is the figure.
func MeasureMemory(ctx context.Context, conn *pgx.Conn, p *Pipeline, t SinkTarget, o MemoryOptions, log *slog.Logger) ([]Result, error) {
	var out []Result
	defer resetSink(ctx, conn, p, t)()
	log.Info("memory: backfill", "sink", t.Kind, "rows", o.Rows)
	start, timeout, err := backfill(ctx, conn, p, o.Rows)
	if err != nil {
		return out, err
	}
	out = append(out, Result{Name: fmt.Sprintf("memory: sluice backfill of %d rows into %s", o.Rows, t.Kind), Rows: int64(o.Rows),
		Elapsed: time.Since(start), Sink: t.Kind, Kind: KindMemoryBackfill, PeakRSS: p.WorkerPeakRSS(), Limit: o.Limit1,
		Parallelism: p.Spec.SnapshotParallelism, Profiles: p.EndPhase(),
		Note: fmt.Sprintf("snapshot_chunk_rows %d%s; fresh worker; ratio to limit 1's rate", o.ChunkRows, parallelismNote(p.Spec.SnapshotParallelism))})
	if err := p.WaitStream(ctx, LatencyTable, start, time.Minute); err != nil {
		return out, err
	}
	log.Info("memory: one large transaction", "sink", t.Kind, "rows", o.Tx)
	tx, err := measureBacklog(ctx, conn, p, "large transaction", int64(o.Tx), timeout, BulkUpdate(conn, o.Tx))
	if err != nil {
		return out, err
	}
	tx.Profiles = p.EndPhase()
	tx.Name, tx.Sink, tx.Kind = fmt.Sprintf("memory: sluice stream of a %d-row transaction into %s", o.Tx, t.Kind), t.Kind, KindMemoryTx
	tx.Note = "one UPDATE consumed from the backlog by a fresh worker, restart included"
	return append(out, tx), nil
}

// MeasureScaling backfills public.orders (rows rows) into the sink once, with the pipeline's
// snapshot_parallelism, in a fresh worker and from an empty sink: one point of the --scaling
// series.
func MeasureScaling(ctx context.Context, conn *pgx.Conn, p *Pipeline, t SinkTarget, rows int, limit1 string, log *slog.Logger) (Result, error) {
	defer resetSink(ctx, conn, p, t)()
	n := max(p.Spec.SnapshotParallelism, 1)
	log.Info("scaling: backfill", "sink", t.Kind, "rows", rows, "snapshot_parallelism", n)
	start, _, err := backfill(ctx, conn, p, rows)
	if err != nil {
		return Result{}, err
	}
	return Result{Name: fmt.Sprintf("scaling: sluice backfill into %s, snapshot_parallelism %d", t.Kind, n), Rows: int64(rows),
		Elapsed: time.Since(start), Limit: limit1, Sink: t.Kind, Kind: KindScaling, Parallelism: n,
		PeakRSS: p.WorkerPeakRSS(), Profiles: p.EndPhase()}, nil
}

// parallelismNote is the report's mention of a backfill's snapshot_parallelism ("" for the default).
func parallelismNote(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("; snapshot_parallelism %d", n)
}
