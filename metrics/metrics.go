// Package metrics holds Sluice's own Prometheus metrics: what a pipeline and each of its tables
// do (rows and batches committed, commit latency, staged backlog and lag, backfill progress,
// maintenance), what the reader reads and what the replication slot retains. The Temporal SDK's
// metrics are not here: the worker exports them through the SDK's OpenTelemetry integration.
//
// Every name follows Prometheus' conventions (the sluice_ prefix, _total for counters, base
// units in the name: _seconds, _bytes). Labels are pipeline and, for per-table metrics, table
// ("schema.name"): only tables of the worker's config get their own series, so a bad input can
// never grow the label set. Methods are safe for concurrent use, and a nil *Metrics does nothing.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicecdc/sluice/source"
)

// OtherTable is the table label of a table the worker's config does not name.
const OtherTable = "_other"

// Metrics are the collectors, registered on one registry.
type Metrics struct {
	tables map[string]map[string]bool // pipeline → configured tables

	rowsCommitted    *prometheus.CounterVec
	batchesCommitted *prometheus.CounterVec
	commitDuration   *prometheus.HistogramVec
	committedLSN     *prometheus.GaugeVec
	stagedBatches    *prometheus.GaugeVec
	stagedBytes      *prometheus.GaugeVec
	lagBytes         *prometheus.GaugeVec
	lagSeconds       *prometheus.GaugeVec
	backfillRows     *prometheus.CounterVec
	backfillEstimate *prometheus.GaugeVec
	failedTables     *prometheus.GaugeVec
	maintenanceRuns  *prometheus.CounterVec
	maintenanceTime  *prometheus.HistogramVec
	readerMessages   *prometheus.CounterVec
	readerBytes      *prometheus.CounterVec
	sourceLSN        *prometheus.GaugeVec
	slotRetained     *prometheus.GaugeVec
	slotSafeWAL      *prometheus.GaugeVec
	slotActive       *prometheus.GaugeVec
	slotWALStatus    *prometheus.GaugeVec
}

// New registers Sluice's metrics on reg. tables are the configured tables of each pipeline
// ("schema.name"): the only table label values besides OtherTable.
func New(reg prometheus.Registerer, tables map[string][]string) *Metrics {
	m := &Metrics{tables: map[string]map[string]bool{}}
	for p, ts := range tables {
		m.tables[p] = map[string]bool{}
		for _, t := range ts {
			m.tables[p][t] = true
		}
	}
	pt := []string{"pipeline", "table"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
		reg.MustRegister(g)
		return g
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		reg.MustRegister(h)
		return h
	}
	latency := prometheus.ExponentialBuckets(0.005, 2.5, 10) // 5 ms to about 19 min
	m.rowsCommitted = counter("sluice_rows_committed_total",
		"Rows written to the sink by commits, by operation (insert, update, delete).", "pipeline", "table", "op")
	m.batchesCommitted = counter("sluice_batches_committed_total",
		"Staged batches committed to the sink (grouped commits count each batch).", pt...)
	m.commitDuration = histogram("sluice_commit_duration_seconds",
		"Duration of one CommitBatch: reading the staged files, the sink commit and the acknowledgement.", latency, pt...)
	m.committedLSN = gauge("sluice_table_committed_lsn",
		"The table's committed source position (WAL LSN as a number), as of this worker's last commit or load.", pt...)
	m.stagedBatches = gauge("sluice_table_staged_batches",
		"Staged batches the table has not committed yet (its queue), from the reader's last listing.", pt...)
	m.stagedBytes = gauge("sluice_staging_bytes",
		"Bytes of staged batch files not yet committed, from the reader's last listing.", "pipeline")
	m.lagBytes = gauge("sluice_table_lag_bytes",
		"WAL bytes between the reader's position and the table's oldest uncommitted change: what the table holds back.", pt...)
	m.lagSeconds = gauge("sluice_table_lag_seconds",
		"Age of the table's oldest uncommitted staged batch (since this reader run staged or first listed it).", pt...)
	m.backfillRows = counter("sluice_backfill_rows_copied_total",
		"Snapshot rows copied to the sink by backfills.", pt...)
	m.backfillEstimate = gauge("sluice_backfill_rows_estimated",
		"Postgres' estimate of the table's rows when its backfill started (pg_class.reltuples).", pt...)
	m.failedTables = gauge("sluice_tables_failed",
		"Tables whose workflow failed and waits for the operator, by error type.", "pipeline", "error_type")
	m.maintenanceRuns = counter("sluice_maintenance_runs_total",
		"Sink maintenance runs (compaction, snapshot expiry), by result (ok, error).", "pipeline", "table", "result")
	m.maintenanceTime = histogram("sluice_maintenance_duration_seconds",
		"Duration of one sink maintenance run.", latency, pt...)
	m.readerMessages = counter("sluice_reader_messages_total",
		"Replication messages (row changes) the reader received.", "pipeline")
	m.readerBytes = counter("sluice_reader_bytes_total",
		"Bytes of row changes the reader staged (compressed staged files).", "pipeline")
	m.sourceLSN = gauge("sluice_source_wal_lsn",
		"The source's current WAL position (pg_current_wal_lsn) as a number.", "pipeline")
	m.slotRetained = gauge("sluice_slot_retained_wal_bytes",
		"WAL the replication slot retains on the source: current WAL position minus the slot's restart_lsn.", "pipeline", "slot")
	m.slotSafeWAL = gauge("sluice_slot_safe_wal_bytes",
		"WAL that can still be written before the slot is invalidated (safe_wal_size; -1 when max_slot_wal_keep_size is unlimited).", "pipeline", "slot")
	m.slotActive = gauge("sluice_slot_active",
		"1 when a reader is connected to the replication slot, 0 when not.", "pipeline", "slot")
	m.slotWALStatus = gauge("sluice_slot_wal_status",
		"The slot's wal_status (reserved, extended, unreserved, lost; missing when the slot is gone): 1 for the current one.", "pipeline", "slot", "wal_status")
	return m
}

// table returns the label of table t of pipeline p: itself when configured, OtherTable if not.
func (m *Metrics) table(p, t string) string {
	if m.tables[p][t] {
		return t
	}
	return OtherTable
}

// Commit records one CommitBatch that committed batches and rows (by operation: "insert",
// "update", "delete"), taking d, leaving the table at committed LSN lsn (0: unknown).
func (m *Metrics) Commit(pipeline, table string, batches int, rows map[string]int64, d time.Duration, lsn uint64) {
	if m == nil {
		return
	}
	t := m.table(pipeline, table)
	m.batchesCommitted.WithLabelValues(pipeline, t).Add(float64(batches))
	for op, n := range rows {
		m.rowsCommitted.WithLabelValues(pipeline, t, op).Add(float64(n))
	}
	m.commitDuration.WithLabelValues(pipeline, t).Observe(d.Seconds())
	m.Committed(pipeline, table, lsn)
}

// Committed records the table's committed position (0: none yet, not recorded).
func (m *Metrics) Committed(pipeline, table string, lsn uint64) {
	if m == nil || lsn == 0 {
		return
	}
	m.committedLSN.WithLabelValues(pipeline, m.table(pipeline, table)).Set(float64(lsn))
}

// TableHold is what one table holds in staging, as the reader's listing found it.
type TableHold struct {
	Batches  int
	Bytes    int64
	LagBytes uint64        // reader position minus the oldest uncommitted batch's lo
	Age      time.Duration // age of the oldest uncommitted batch
}

// Staged records the pipeline's staged backlog from one listing: every configured table of the
// pipeline not in holds holds nothing.
func (m *Metrics) Staged(pipeline string, holds map[string]TableHold) {
	if m == nil {
		return
	}
	var bytes int64
	agg := map[string]TableHold{}
	for t, h := range holds {
		bytes += h.Bytes
		l := m.table(pipeline, t)
		a := agg[l]
		a.Batches += h.Batches
		a.Bytes += h.Bytes
		a.LagBytes = max(a.LagBytes, h.LagBytes)
		a.Age = max(a.Age, h.Age)
		agg[l] = a
	}
	for t := range m.tables[pipeline] {
		h := agg[t]
		m.stagedBatches.WithLabelValues(pipeline, t).Set(float64(h.Batches))
		m.lagBytes.WithLabelValues(pipeline, t).Set(float64(h.LagBytes))
		m.lagSeconds.WithLabelValues(pipeline, t).Set(h.Age.Seconds())
	}
	if h, ok := agg[OtherTable]; ok {
		m.stagedBatches.WithLabelValues(pipeline, OtherTable).Set(float64(h.Batches))
	}
	m.stagedBytes.WithLabelValues(pipeline).Set(float64(bytes))
}

// ReaderStopped zeroes the pipeline's staged-backlog gauges (queue, lag, staging bytes) when this
// worker's reader run ends: the next run may be on another worker, and a value left behind here
// would stay frozen, so a max() across workers would show (and alert on) a backlog long gone.
// The series stay, at zero, so every panel and rule finds them; while no reader runs anywhere,
// SluiceReaderDown speaks and the slot's retained WAL (reported by every worker) keeps growing.
func (m *Metrics) ReaderStopped(pipeline string) {
	if m == nil {
		return
	}
	m.Staged(pipeline, nil)
	m.stagedBatches.DeleteLabelValues(pipeline, OtherTable)
}

// Read records replication messages received and bytes staged by the reader.
func (m *Metrics) Read(pipeline string, messages, bytes int64) {
	if m == nil {
		return
	}
	m.readerMessages.WithLabelValues(pipeline).Add(float64(messages))
	m.readerBytes.WithLabelValues(pipeline).Add(float64(bytes))
}

// BackfillStarted records the row estimate of a table whose backfill starts.
func (m *Metrics) BackfillStarted(pipeline, table string, estimate int64) {
	if m == nil {
		return
	}
	m.backfillEstimate.WithLabelValues(pipeline, m.table(pipeline, table)).Set(float64(max(estimate, 0)))
}

// BackfillCopied records snapshot rows copied.
func (m *Metrics) BackfillCopied(pipeline, table string, rows int64) {
	if m == nil {
		return
	}
	m.backfillRows.WithLabelValues(pipeline, m.table(pipeline, table)).Add(float64(rows))
}

// Maintained records one maintenance run of a table's sink target.
func (m *Metrics) Maintained(pipeline, table string, d time.Duration, err error) {
	if m == nil {
		return
	}
	t := m.table(pipeline, table)
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.maintenanceRuns.WithLabelValues(pipeline, t, result).Inc()
	m.maintenanceTime.WithLabelValues(pipeline, t).Observe(d.Seconds())
}

// FailedTables records how many tables of the pipeline have failed, by error type (types not
// in failed count zero, so a resumed table's series drops back).
func (m *Metrics) FailedTables(pipeline string, failed map[string]int) {
	if m == nil {
		return
	}
	m.failedTables.DeletePartialMatch(prometheus.Labels{"pipeline": pipeline})
	for typ, n := range failed {
		m.failedTables.WithLabelValues(pipeline, typ).Set(float64(n))
	}
}

// SlotObserved records the slot's state from one poll.
func (m *Metrics) SlotObserved(pipeline string, s source.SlotState) {
	if m == nil {
		return
	}
	m.sourceLSN.WithLabelValues(pipeline).Set(float64(s.Current))
	m.slotWALStatus.DeletePartialMatch(prometheus.Labels{"pipeline": pipeline, "slot": s.Slot})
	if !s.Exists {
		m.slotActive.WithLabelValues(pipeline, s.Slot).Set(0)
		m.slotRetained.DeleteLabelValues(pipeline, s.Slot)
		m.slotSafeWAL.DeleteLabelValues(pipeline, s.Slot)
		m.slotWALStatus.WithLabelValues(pipeline, s.Slot, "missing").Set(1)
		return
	}
	active := 0.0
	if s.Active {
		active = 1
	}
	m.slotActive.WithLabelValues(pipeline, s.Slot).Set(active)
	m.slotRetained.WithLabelValues(pipeline, s.Slot).Set(float64(max(s.RetainedBytes, 0)))
	safe := int64(-1)
	if s.SafeWALSize != nil {
		safe = *s.SafeWALSize
	}
	m.slotSafeWAL.WithLabelValues(pipeline, s.Slot).Set(float64(safe))
	m.slotWALStatus.WithLabelValues(pipeline, s.Slot, s.WALStatus).Set(1)
}
