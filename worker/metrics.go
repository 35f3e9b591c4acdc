package main

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// metricsHandler exposes the Temporal SDK's worker metrics (task latencies, poll counts,
// activity failures, sticky cache) as Prometheus metrics named sluice_temporal_<name>.
type metricsHandler struct {
	reg  *prometheus.Registry
	tags map[string]string
	all  *collectorSet
}

// collectorSet holds the collectors created so far, shared by the handlers WithTags derives. A
// metric keeps the label names it was first used with; later values for other labels are
// dropped and missing ones are empty.
type collectorSet struct {
	mu     sync.Mutex
	byName map[string]collector
}

type collector struct {
	vec    any // *prometheus.CounterVec, *prometheus.GaugeVec or *prometheus.HistogramVec
	labels []string
}

func newMetricsHandler(reg *prometheus.Registry) client.MetricsHandler {
	return &metricsHandler{reg: reg, tags: map[string]string{}, all: &collectorSet{byName: map[string]collector{}}}
}

func (h *metricsHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return &metricsHandler{reg: h.reg, tags: merged, all: h.all}
}

// get returns the collector of name, creating and registering it with make on first use, and
// the handler's values for its labels. ok is false when it cannot be registered.
func (h *metricsHandler) get(name string, newVec func(fq string, labels []string) prometheus.Collector) (any, []string, bool) {
	h.all.mu.Lock()
	defer h.all.mu.Unlock()
	c, found := h.all.byName[name]
	if !found {
		labels := make([]string, 0, len(h.tags))
		for k := range h.tags {
			labels = append(labels, k)
		}
		sort.Strings(labels)
		fq := "sluice_temporal_" + strings.NewReplacer(".", "_", "-", "_").Replace(name)
		coll := newVec(fq, labels)
		if err := h.reg.Register(coll); err != nil {
			return nil, nil, false
		}
		c = collector{vec: coll, labels: labels}
		h.all.byName[name] = c
	}
	vals := make([]string, len(c.labels))
	for i, l := range c.labels {
		vals[i] = h.tags[l]
	}
	return c.vec, vals, true
}

func (h *metricsHandler) Counter(name string) client.MetricsCounter {
	vec, vals, ok := h.get(name, func(fq string, labels []string) prometheus.Collector {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: fq, Help: "Temporal SDK counter " + name}, labels)
	})
	if cv, isCV := vec.(*prometheus.CounterVec); ok && isCV {
		if c, err := cv.GetMetricWithLabelValues(vals...); err == nil {
			return counter{c}
		}
	}
	return nopMetric{}
}

func (h *metricsHandler) Gauge(name string) client.MetricsGauge {
	vec, vals, ok := h.get(name, func(fq string, labels []string) prometheus.Collector {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: fq, Help: "Temporal SDK gauge " + name}, labels)
	})
	if gv, isGV := vec.(*prometheus.GaugeVec); ok && isGV {
		if g, err := gv.GetMetricWithLabelValues(vals...); err == nil {
			return gauge{g}
		}
	}
	return nopMetric{}
}

func (h *metricsHandler) Timer(name string) client.MetricsTimer {
	vec, vals, ok := h.get(name, func(fq string, labels []string) prometheus.Collector {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: fq + "_seconds", Help: "Temporal SDK timer " + name,
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, labels)
	})
	if hv, isHV := vec.(*prometheus.HistogramVec); ok && isHV {
		if o, err := hv.GetMetricWithLabelValues(vals...); err == nil {
			return timer{o}
		}
	}
	return nopMetric{}
}

type counter struct{ c prometheus.Counter }

func (c counter) Inc(n int64) { c.c.Add(float64(n)) }

type gauge struct{ g prometheus.Gauge }

func (g gauge) Update(v float64) { g.g.Set(v) }

type timer struct{ o prometheus.Observer }

func (t timer) Record(d time.Duration) { t.o.Observe(d.Seconds()) }

type nopMetric struct{}

func (nopMetric) Inc(int64)            {}
func (nopMetric) Update(float64)       {}
func (nopMetric) Record(time.Duration) {}
