package broker

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the broker's Prometheus series, on a registry of the
// broker's own (several brokers may share a process in tests). Names of
// the delivery contract are the spec's, but for the one that broke
// Prometheus's conventions in the spec's own jargon
// (cm_broker_rate_limit_consumed_then_b2_rejected_total, now
// cm_broker_rate_limit_spent_on_rejected_total); integration's
// TestMetricsLint holds them to promlint.
type metrics struct {
	reg                 *prometheus.Registry
	accepts             *prometheus.CounterVec // {outcome}
	fingerprintMismatch *prometheus.CounterVec // {mesh_id}
	rateLimitRejected   prometheus.Counter
	spentOnRejected     prometheus.Counter
	acceptBatch         prometheus.Histogram
	acceptLatency       prometheus.Histogram
	firstSends          prometheus.Counter
	connections         prometheus.Gauge
	pushes              prometheus.Counter
	acks                prometheus.Counter
	orphanChecks        prometheus.Counter
	orphansFound        prometheus.Gauge
	atomicityViolation  prometheus.Gauge
	dedupeExpired       prometheus.Counter
	messagesPruned      prometheus.Counter
	leasesReleased      prometheus.Counter
	helloReplays        prometheus.Counter
	locksExpired        prometheus.Counter
	relayDrains         prometheus.Counter
	sessionsTaken       prometheus.Counter
	listenReconnects    *prometheus.CounterVec // {channel}
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.accepts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_broker_accept_total",
		Help: "Sends answered, by outcome: created, duplicate, conflict, rejected, failed, rate_limited."}, []string{"outcome"})
	m.fingerprintMismatch = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_broker_dedupe_fingerprint_mismatch_total",
		Help: "Sends refused 409: a known client_message_id with another request fingerprint."}, []string{"mesh_id"})
	m.rateLimitRejected = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_rate_limit_rejection_total",
		Help: "Sends refused by the rate limiter (B1)."})
	m.spentOnRejected = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_rate_limit_spent_on_rejected_total",
		Help: "Sends the rate limiter counted that the accept transaction then rejected: rate budget spent on nothing."})
	m.acceptBatch = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cm_broker_accept_batch_size",
		Help: "Sends per accept transaction (group commit).", Buckets: prometheus.ExponentialBuckets(1, 2, 9)})
	m.acceptLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cm_broker_accept_seconds",
		Help:    "From a send frame's arrival to its ack, for the sends that reached the accept transaction (whatever it answered).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15)})
	m.firstSends = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_first_send_total",
		Help: "Sends marked first_send by their sender: their B0 dedupe read skipped (the accept transaction still answers duplicates)."})
	m.connections = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cm_broker_connections",
		Help: "Open WebSocket connections."})
	m.pushes = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_push_total", Help: "Message pushes written to connections."})
	m.acks = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_client_ack_total", Help: "client_ack frames received."})
	m.orphanChecks = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_dedupe_orphan_check_total",
		Help: "Runs of the dedupe orphan check."})
	m.orphansFound = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cm_broker_dedupe_orphan_found",
		Help: "Dedupe rows without their message and with history_available still true, at the last check (expected 0)."})
	m.atomicityViolation = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cm_broker_atomicity_violation_found",
		Help: "History rows without a dedupe row, at the last check (expected 0)."})
	m.dedupeExpired = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_dedupe_expired_total",
		Help: "Dedupe rows deleted by retention."})
	m.messagesPruned = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_messages_pruned_total",
		Help: "Message rows deleted by retention (their dedupe rows keep history_available=false)."})
	m.leasesReleased = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_leases_released_total",
		Help: "Delivery leases freed because the connection holding them closed, had closed when the push went out, or belongs to a key that just connected again (pushed again at once)."})
	m.helloReplays = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_hello_replay_refused_total",
		Help: "Hellos and session_hellos refused because their signature was already used within its window (hello_replayed)."})
	m.locksExpired = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_locks_expired_total",
		Help: "Locks cleared by the sweep after their holder stopped renewing them."})
	m.relayDrains = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_relay_fallback_drains_total",
		Help: "Connections the relay poll had drain: deliveries for them waited unclaimed longer than the poll interval (PostgreSQL; a notification this replica missed)."})
	m.sessionsTaken = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_broker_sessions_taken_over_total",
		Help: "Connections closed because their session key connected again at another replica (PostgreSQL), which took the session over."})
	m.listenReconnects = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_broker_listen_reconnects_total",
		Help: "LISTEN connections re-established after a loss (dropped, or found dead by a probe), by channel: delivery, state, locks, reservations, sessions."}, []string{"channel"})
	for _, c := range []prometheus.Collector{m.accepts, m.fingerprintMismatch, m.rateLimitRejected, m.spentOnRejected,
		m.acceptBatch, m.acceptLatency, m.firstSends, m.connections, m.pushes, m.acks, m.orphanChecks, m.orphansFound, m.atomicityViolation,
		m.dedupeExpired, m.messagesPruned, m.leasesReleased, m.helloReplays, m.locksExpired, m.relayDrains, m.sessionsTaken, m.listenReconnects} {
		f(c)
	}
	return m
}

// listened returns the connected callback of a LISTEN channel's listener:
// every connection after the first is a reconnect. The listener calls it
// from one goroutine.
func (m *metrics) listened(channel string) func() {
	first := true
	return func() {
		if first {
			first = false
			return
		}
		m.listenReconnects.WithLabelValues(channel).Inc()
	}
}

// handler serves the registry in the Prometheus text format.
func (m *metrics) handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }
