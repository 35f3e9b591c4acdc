package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/testkit/localrun"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// scrape is one read of a worker's /metrics.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(ctx context.Context, addr string) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", addr, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the scrape of %s: %w", addr, err)
	}
	return fams, nil
}

// value is the sum of the values of the series of metric name whose labels include want
// (a counter's, a gauge's or a histogram's sample count), and whether any matched.
func (s scrape) value(name string, want map[string]string) (float64, bool) {
	f, ok := s[name]
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		found = true
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// labelNames are the label names the series of metric name carry, all series together.
func (s scrape) labelNames(name string) map[string]bool {
	names := map[string]bool{}
	for _, m := range s[name].GetMetric() {
		for _, l := range m.GetLabel() {
			names[l.GetName()] = true
		}
	}
	return names
}

// waitMetric scrapes until ok holds for the scrape, failing the test after timeout with the
// last scrape's account.
func waitMetric(t *testing.T, addr, what string, timeout time.Duration, ok func(s scrape) (bool, string)) scrape {
	t.Helper()
	var last scrape
	err := localrun.WaitFor(context.Background(), what, timeout, 250*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		s, err := scrapeMetrics(ctx, addr)
		if err != nil {
			return false, err.Error(), nil
		}
		last = s
		done, why := ok(s)
		return done, why, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return last
}

func healthz(ctx context.Context, addr, path string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestMetricsFollowThePipeline scrapes a worker's /metrics through a pipeline's life and checks
// each metric moves as an operator reads it: backfilled rows equal the table's rows; rows
// committed by operation equal the rows inserted, updated and deleted; a paused table's queue,
// lag and the slot's retained WAL rise and its queue and lag fall back after resume; a poisoned
// table shows in the failed-tables metric; the Temporal SDK's metrics keep every label. Then
// /healthz fails while the worker's connection to Temporal is cut, and recovers. Last, every
// metric deploy/'s alert rules and dashboard read is in the scrape (checkDeployedMetrics).
func TestMetricsFollowThePipeline(t *testing.T) {
	defer parallel(t)()
	px := startProxy(t, testenv.Temporal(t))
	p := newPipelineWith(t, pipelineOptions{Temporal: px.Addr(), Tables: []string{"public.a:raw.a", "public.b:raw.b"},
		SetupSQL: twoTablesDDL(1000)})
	w := p.worker("worker")
	p.sluice("start")
	ctx := context.Background()
	addr, err := w.MetricsAddr(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a := map[string]string{"pipeline": p.name, "table": "public.a"}
	withOp := func(op string) map[string]string {
		return map[string]string{"pipeline": p.name, "table": "public.a", "op": op}
	}
	p.waitStream(tableA)
	p.waitStream(tableB)

	// The backfill copied every row, and said how many it expected.
	s := waitMetric(t, addr, "the backfill's rows", time.Minute, func(s scrape) (bool, string) {
		n, _ := s.value("sluice_backfill_rows_copied_total", a)
		return n == 1000, fmt.Sprintf("sluice_backfill_rows_copied_total{table=public.a} = %v, want 1000", n)
	})
	if est, ok := s.value("sluice_backfill_rows_estimated", a); !ok || est <= 0 {
		t.Errorf("sluice_backfill_rows_estimated{table=public.a} = %v (found %v), want an estimate", est, ok)
	}

	// Rows committed by operation, each operation in its own transactions and batches.
	p.exec(`INSERT INTO public.a SELECT g, 'a-' || g, 1 FROM generate_series(1001, 1300) g`)
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)
	p.exec(`UPDATE public.a SET qty = qty + 1 WHERE id <= 120`)
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)
	p.exec(`DELETE FROM public.a WHERE id > 1250`)
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)
	s = waitMetric(t, addr, "rows committed by operation", 30*time.Second, func(s scrape) (bool, string) {
		ins, _ := s.value("sluice_rows_committed_total", withOp("insert"))
		upd, _ := s.value("sluice_rows_committed_total", withOp("update"))
		del, _ := s.value("sluice_rows_committed_total", withOp("delete"))
		return ins == 300 && upd == 120 && del == 50,
			fmt.Sprintf("rows committed insert %v update %v delete %v, want 300, 120, 50", ins, upd, del)
	})
	if n, _ := s.value("sluice_batches_committed_total", a); n < 3 {
		t.Errorf("sluice_batches_committed_total{table=public.a} = %v, want at least 3", n)
	}
	if n, _ := s.value("sluice_commit_duration_seconds", a); n < 3 {
		t.Errorf("sluice_commit_duration_seconds{table=public.a} counts %v commits, want at least 3", n)
	}
	if lsn, _ := s.value("sluice_table_committed_lsn", a); lsn <= 0 || uint64(lsn) > p.currentLSN(ctx) {
		t.Errorf("sluice_table_committed_lsn{table=public.a} = %v, want a position up to the source's %d", lsn, p.currentLSN(ctx))
	}
	if n, _ := s.value("sluice_reader_messages_total", map[string]string{"pipeline": p.name}); n < 470 {
		t.Errorf("sluice_reader_messages_total = %v, want at least the 470 row changes", n)
	}

	// Paused: the queue, the lag and the slot's retained WAL rise.
	slot := map[string]string{"pipeline": p.name, "slot": p.cfg.Source.Slot}
	retainedBefore, _ := s.value("sluice_slot_retained_wal_bytes", slot)
	p.sluice("pause", "--table", "public.a")
	for i := range 5 {
		p.exec(fmt.Sprintf(`UPDATE public.a SET name = name || '.' WHERE id %% 5 = %d`, i))
	}
	waitMetric(t, addr, "the paused table's queue, lag and retained WAL to rise", time.Minute, func(s scrape) (bool, string) {
		q, _ := s.value("sluice_table_staged_batches", a)
		lagB, _ := s.value("sluice_table_lag_bytes", a)
		lagS, _ := s.value("sluice_table_lag_seconds", a)
		ret, _ := s.value("sluice_slot_retained_wal_bytes", slot)
		return q >= 1 && lagB > 0 && lagS > 0 && ret > retainedBefore,
			fmt.Sprintf("staged batches %v, lag %v bytes %v s, retained WAL %v (before the pause %v)", q, lagB, lagS, ret, retainedBefore)
	})
	p.sluice("resume", "--table", "public.a")
	p.waitEqual("public.a", "raw.a", "id", twoTableColumns)
	waitMetric(t, addr, "the resumed table's queue and lag to fall", time.Minute, func(s scrape) (bool, string) {
		q, _ := s.value("sluice_table_staged_batches", a)
		lagB, _ := s.value("sluice_table_lag_bytes", a)
		return q == 0 && lagB == 0, fmt.Sprintf("staged batches %v, lag %v bytes", q, lagB)
	})

	// A poisoned table shows in the failed-tables metric, by its error type (an operator dropped
	// a column the batches carry from the Iceberg table).
	dropIcebergColumn(ctx, t, p.icebergTable(ctx, p.icebergSink(), "raw.b"), "qty")
	p.exec(`INSERT INTO public.b VALUES (5000, 'poisoned', 5000)`)
	p.waitTableFailed(tableB)
	waitMetric(t, addr, "the failed table in the metrics", time.Minute, func(s scrape) (bool, string) {
		n, _ := s.value("sluice_tables_failed", map[string]string{"pipeline": p.name, "error_type": failure.PoisonBatch})
		return n == 1, fmt.Sprintf("sluice_tables_failed{error_type=PoisonBatch} = %v, want 1", n)
	})

	// The SDK's metrics, with their standard names and every label.
	s, err = scrapeMetrics(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if l := s.labelNames("temporal_request_total"); !l["namespace"] || !l["operation"] {
		t.Errorf("temporal_request_total has labels %v, want namespace and operation among them", l)
	}
	if l := s.labelNames("temporal_activity_execution_latency_seconds"); !l["activity_type"] {
		t.Errorf("temporal_activity_execution_latency_seconds has labels %v, want activity_type", l)
	}
	for name := range s {
		if strings.HasPrefix(name, "sluice_temporal_") {
			t.Errorf("metric %s: the SDK's metrics keep their own names", name)
		}
	}

	// Health follows the worker's connection to Temporal.
	if code, body := healthz(ctx, addr, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz answered %d %q before the cut, want 200", code, body)
	}
	px.Cut()
	err = localrun.WaitFor(ctx, "/healthz to fail while Temporal is cut", time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		code, body := healthz(ctx, addr, "/healthz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "Temporal unreachable"), fmt.Sprintf("%d %q", code, body), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	px.Restore()
	err = localrun.WaitFor(ctx, "/healthz to recover", time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		code, body := healthz(ctx, addr, "/healthz")
		return code == http.StatusOK, fmt.Sprintf("%d %q", code, body), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Every metric the alert rules and the Grafana dashboard read is in this worker's scrape.
	if s, err = scrapeMetrics(ctx, addr); err != nil {
		t.Fatal(err)
	}
	checkDeployedMetrics(t, s)
}
