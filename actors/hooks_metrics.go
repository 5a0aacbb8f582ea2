package actors

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HookMetrics are the hooks worker's series, registered beside the
// daemon's (transport/ipc/metrics); the daemon adds the gauges of
// hooks.db's state, read at scrape time (actors/daemon/hooks.go).
type HookMetrics struct {
	Rows   *prometheus.CounterVec   // cm_daemon_hook_rows_total{event_type,outcome}
	Handle *prometheus.HistogramVec // cm_daemon_hook_handle_seconds{event_type}
}

// NewHookMetrics makes the worker's series and registers them with reg.
func NewHookMetrics(reg prometheus.Registerer) *HookMetrics {
	m := &HookMetrics{
		Rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_daemon_hook_rows_total",
			Help: "Hook outbox rows the worker is done with, by event type and outcome: delivered, failed (non-retryable or not JSON), coalesced, evicted (bursty rows under backpressure), retry (a retryable failure), released (handed back unhandled)."},
			[]string{"event_type", "outcome"}),
		Handle: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cm_daemon_hook_handle_seconds",
			Help: "Time a hook handler took, by event type.", Buckets: latency}, []string{"event_type"}),
	}
	reg.MustRegister(m.Rows, m.Handle)
	return m
}

// latency buckets, in seconds: 0.1 ms to about 3 s (as the daemon's).
var latency = prometheus.ExponentialBuckets(0.0001, 2, 15)

func (m *HookMetrics) outcome(eventType, outcome string) {
	if m != nil {
		m.Rows.WithLabelValues(eventType, outcome).Inc()
	}
}

func (m *HookMetrics) handled(eventType string, took time.Duration) {
	if m != nil {
		m.Handle.WithLabelValues(eventType).Observe(took.Seconds())
	}
}
