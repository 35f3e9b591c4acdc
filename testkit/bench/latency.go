package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// CreateLatencyTable (re)creates public.bench_latency, the table the latency run inserts into.
func CreateLatencyTable(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `DROP TABLE IF EXISTS public.bench_latency;
CREATE TABLE public.bench_latency (id bigint PRIMARY KEY, committed_at timestamptz NOT NULL, pad text NOT NULL)`)
	if err != nil {
		return fmt.Errorf("creating public.bench_latency: %w", err)
	}
	return nil
}

// LatencyResult is the end-to-end latency of one fixed-rate run.
type LatencyResult struct {
	Rows      int64         // rows inserted
	Elapsed   time.Duration // how long the writer ran
	Requested int           // rows/s asked for
	Seen      int64         // rows seen in the sink before the wait ended
	P50, P99  time.Duration
	Max       time.Duration
	PollEvery time.Duration
}

// Sustained is the insert rate the source actually took, rows/s.
func (l LatencyResult) Sustained() float64 {
	if l.Elapsed <= 0 {
		return 0
	}
	return float64(l.Rows) / l.Elapsed.Seconds()
}

type commitRange struct {
	hi int64 // ids (previous hi, hi] committed at
	at time.Time
}

type sighting struct {
	upTo int64 // every id <= upTo visible at
	at   time.Time
}

// MeasureLatency inserts into public.bench_latency at rate rows/s for d (one transaction every
// 10 ms, ids increasing from 1), polls probe every pollEvery, and returns the distribution of
// (first poll that saw the row, as its end time) - (the insert's COMMIT returned to the client).
// Rows not seen within wait after the writer stops are reported as not seen.
func MeasureLatency(ctx context.Context, conn *pgx.Conn, probe Probe, rate int, d, pollEvery, wait time.Duration) (LatencyResult, error) {
	res := LatencyResult{Requested: rate, PollEvery: pollEvery}
	var (
		mu       sync.Mutex
		commits  []commitRange
		sights   []sighting
		written  atomic.Int64
		pollErr  error
		pollDone = make(chan struct{})
	)
	writerDone := make(chan struct{})
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	go func() {
		defer close(pollDone)
		var seen int64
		var deadline time.Time
		for {
			select {
			case <-pollCtx.Done():
				return
			case <-time.After(pollEvery):
			}
			limit := written.Load()
			m, err := probe.MaxVisible(pollCtx, seen, limit)
			now := time.Now()
			if err != nil {
				if pollCtx.Err() == nil {
					pollErr = err
				}
				return
			}
			if m > seen {
				seen = m
				mu.Lock()
				sights = append(sights, sighting{upTo: m, at: now})
				mu.Unlock()
			}
			select {
			case <-writerDone:
				if deadline.IsZero() {
					deadline = now.Add(wait)
				}
				if seen >= written.Load() || now.After(deadline) {
					return
				}
			default:
			}
		}
	}()

	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	var id int64
	for time.Since(start) < d {
		select {
		case <-ctx.Done():
			close(writerDone)
			return res, ctx.Err()
		case <-tick.C:
		}
		due := int64(time.Since(start).Seconds() * float64(rate))
		n := min(due-id, int64(rate)) // at most a second's worth per transaction
		if n <= 0 {
			continue
		}
		if _, err := conn.Exec(ctx, `INSERT INTO public.bench_latency (id, committed_at, pad)
			SELECT g, clock_timestamp(), 'latency' FROM generate_series($1::bigint, $2::bigint) g`, id+1, id+n); err != nil {
			tick.Stop()
			close(writerDone)
			return res, fmt.Errorf("inserting into public.bench_latency: %w", err)
		}
		at := time.Now()
		id += n
		mu.Lock()
		commits = append(commits, commitRange{hi: id, at: at})
		mu.Unlock()
		written.Store(id)
	}
	tick.Stop()
	res.Rows, res.Elapsed = id, time.Since(start)
	close(writerDone)
	<-pollDone
	if pollErr != nil {
		return res, fmt.Errorf("polling the sink: %w", pollErr)
	}
	lat := latencies(commits, sights)
	res.Seen = int64(len(lat))
	if len(lat) > 0 {
		res.P50, res.P99, res.Max = Percentile(lat, 50), Percentile(lat, 99), lat[len(lat)-1]
	}
	return res, nil
}

// latencies pairs every committed id with the first sighting covering it; the result is sorted.
func latencies(commits []commitRange, sights []sighting) []time.Duration {
	var out []time.Duration
	var lo int64
	s := 0
	for _, c := range commits {
		for id := lo + 1; id <= c.hi; id++ {
			for s < len(sights) && sights[s].upTo < id {
				s++
			}
			if s == len(sights) {
				slices.Sort(out)
				return out
			}
			out = append(out, sights[s].at.Sub(c.at))
		}
		lo = c.hi
	}
	slices.Sort(out)
	return out
}

// Percentile is the p-th percentile (nearest rank) of sorted durations.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
