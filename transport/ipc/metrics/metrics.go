// Package metrics holds the daemon's Prometheus series (spec §10.3, named
// by Prometheus's conventions — base units, ratios, counters ending in
// _total — where the spec's names break them: its cm_daemon_lag_ms is
// cm_daemon_lag_seconds, cm_daemon_disk_pct cm_daemon_disk_ratio,
// cm_daemon_ipc_request_total cm_daemon_ipc_requests_total), served at
// GET /v1/metrics; integration's TestMetricsLint holds them to promlint. Counters
// and histograms are updated where things happen — the IPC server, the
// store, the dispatcher, the inbox, the broker connection, the events
// actor; the gauges of state (connection, lag, outbox depth) are read from
// the actors when the endpoint is scraped. The registry is the daemon's
// own, so several daemons can share a process in tests.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Daemon is one daemon's series.
type Daemon struct {
	Registry *prometheus.Registry

	// Set at scrape time.
	Connected   *prometheus.GaugeVec // cm_daemon_connected{mesh}
	Lag         *prometheus.GaugeVec // cm_daemon_lag_seconds{mesh}
	OutboxDepth *prometheus.GaugeVec // cm_daemon_outbox_depth{mesh,status}
	SendPaused  *prometheus.GaugeVec // cm_daemon_send_paused_seconds{mesh}
	SendPace    *prometheus.GaugeVec // cm_daemon_send_pace_seconds{mesh}
	DestBackoff *prometheus.GaugeVec // cm_daemon_destination_backoffs{mesh}
	Waiting     *prometheus.GaugeVec // cm_daemon_claims_waiting{mesh,kind}

	Send           *prometheus.CounterVec   // cm_daemon_send_total{mesh,kind,status}
	Dedupe         *prometheus.CounterVec   // cm_daemon_dedupe_total{mesh,direction}
	Recv           *prometheus.CounterVec   // cm_daemon_recv_total{mesh,kind,from_type}
	Undecrypted    *prometheus.CounterVec   // cm_daemon_decrypt_failed_total{mesh}
	Reconnects     *prometheus.CounterVec   // cm_daemon_reconnects_total{mesh,reason}
	Dispatch       *prometheus.HistogramVec // cm_daemon_dispatch_seconds{mesh,outcome}
	Refused        *prometheus.CounterVec   // cm_daemon_send_refused_total{mesh,reason}
	IPCRequests    *prometheus.CounterVec   // cm_daemon_ipc_requests_total{endpoint,status,transport}
	IPCDuration    *prometheus.HistogramVec // cm_daemon_ipc_duration_seconds{endpoint}
	SSEStreams     prometheus.Gauge         // cm_daemon_sse_streams
	SSEDropped     prometheus.Counter       // cm_daemon_sse_dropped_total
	TokenRotations prometheus.Counter       // cm_daemon_local_token_rotations_total
	StoreBatch     prometheus.Histogram     // cm_daemon_store_batch_size
	StoreCommit    *prometheus.HistogramVec // cm_daemon_store_commit_seconds{db,durability}
	DiskRatio      *prometheus.GaugeVec     // cm_daemon_disk_ratio{kind}
	InboxRows      prometheus.Gauge         // cm_daemon_inbox_rows
	InboxBytes     prometheus.Gauge         // cm_daemon_inbox_bytes
	Pruned         *prometheus.CounterVec   // cm_daemon_retention_pruned_total{kind}
}

// latency buckets, in seconds: 0.1 ms to about 3 s.
var latency = prometheus.ExponentialBuckets(0.0001, 2, 15)

// New returns the series, registered.
func New() *Daemon {
	d := &Daemon{Registry: prometheus.NewRegistry()}
	d.Connected = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cm_daemon_connected",
		Help: "1 while the mesh's broker connection is up."}, []string{"mesh"})
	d.Lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cm_daemon_lag_seconds",
		Help: "Round trip of the last answered ping to the mesh's broker."}, []string{"mesh"})
	d.OutboxDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cm_daemon_outbox_depth",
		Help: "Outbox rows by status: pending, inflight, dead (done and aborted rows are history)."}, []string{"mesh", "status"})
	d.SendPaused = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cm_daemon_send_paused_seconds",
		Help: "Time left in the pause of the mesh's sends after a broker's rate-limit refusal (0: not paused)."}, []string{"mesh"})
	d.SendPace = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cm_daemon_send_pace_seconds",
		Help: "Least interval between two of the mesh's sends since the broker limited their rate (0: not paced)."}, []string{"mesh"})
	d.DestBackoff = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cm_daemon_destination_backoffs",
		Help: "Destinations of the mesh whose sends wait out a backoff after the broker answered `no connected peer`."}, []string{"mesh"})
	d.Waiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cm_daemon_claims_waiting",
		Help: "Lock acquires and reserves waiting (their wait) for what is in their way to be freed."}, []string{"mesh", "kind"})
	d.Refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_daemon_send_refused_total",
		Help: "Sends the broker refused and the daemon waits out rather than retry at once, by reason (rate_limit, no_connected_peer)."},
		[]string{"mesh", "reason"})
	d.Send = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_daemon_send_total",
		Help: "POST /v1/send answers by destination kind (dm, topic, group, broadcast) and outcome."}, []string{"mesh", "kind", "status"})
	d.Dedupe = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_daemon_dedupe_total",
		Help: "Repeats recognised by client_message_id: out = a send answered from its existing outbox row, in = a push already in the inbox."},
		[]string{"mesh", "direction"})
	d.Recv = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_daemon_recv_total",
		Help: "Messages stored in the inbox, by kind (dm, topic) and sender type."}, []string{"mesh", "kind", "from_type"})
	d.Undecrypted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_daemon_decrypt_failed_total",
		Help: "Pushes stored without a body because they did not decrypt."}, []string{"mesh"})
	d.Reconnects = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_daemon_reconnects_total",
		Help: "Broker connections re-established after a drop, by the drop's close code."}, []string{"mesh", "reason"})
	d.Dispatch = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cm_daemon_dispatch_seconds",
		Help: "From a send frame leaving to the broker's answer being applied, by outcome (done, dead, retry).", Buckets: latency},
		[]string{"mesh", "outcome"})
	d.IPCRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_daemon_ipc_requests_total",
		Help: "IPC requests by route, HTTP status and transport (uds, tcp)."}, []string{"endpoint", "status", "transport"})
	d.IPCDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cm_daemon_ipc_duration_seconds",
		Help: "IPC request durations by route (event streams excluded).", Buckets: latency}, []string{"endpoint"})
	d.SSEStreams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cm_daemon_sse_streams", Help: "Open GET /v1/events streams."})
	d.SSEDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_daemon_sse_dropped_total",
		Help: "Event streams closed for falling too far behind (the client resumes by Last-Event-ID)."})
	d.TokenRotations = prometheus.NewCounter(prometheus.CounterOpts{Name: "cm_daemon_local_token_rotations_total",
		Help: "Rotations of the TCP bearer token (claudemesh daemon rotate-token)."})
	d.StoreBatch = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cm_daemon_store_batch_size",
		Help: "Commands per store batch (group commit).", Buckets: prometheus.ExponentialBuckets(1, 2, 10)})
	d.StoreCommit = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cm_daemon_store_commit_seconds",
		Help: "Store commit latency by database (outbox, inbox) and durability (relaxed: a commit, never fsynced itself; wal_sync: an fsync of the WAL — the store's WAL syncers', and outbox.db's deferred one under [outbox] fsync_mode batched_50ms and off).", Buckets: latency},
		[]string{"db", "durability"})
	d.DiskRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cm_daemon_disk_ratio",
		Help: "Disk pressure as a ratio (1 = full), at the last measurement: outbox = outbox.db and its WAL against [outbox] max_size_mb; free = [disk] reserved_mb against the free space (at 0.8 outbox_pressure_high, at 0.95 sends are refused 507, at 1 degraded: new event streams refused 503)."},
		[]string{"kind"})
	d.InboxRows = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cm_daemon_inbox_rows",
		Help: "Messages in the inbox, counted when a retention pass has pruned all it could."})
	d.InboxBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cm_daemon_inbox_bytes",
		Help: "Size of inbox.db and its WAL, at the same moment."})
	d.Pruned = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cm_daemon_retention_pruned_total",
		Help: "What retention let go: inbox rows, events, outbox payloads, audit entries."}, []string{"kind"})
	d.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d.Registry.MustRegister(d.InboxRows, d.InboxBytes, d.Pruned, d.DiskRatio, d.Connected, d.Lag, d.OutboxDepth, d.Send, d.Dedupe, d.Recv, d.Undecrypted, d.Reconnects,
		d.SendPaused, d.SendPace, d.DestBackoff, d.Waiting, d.Refused, d.Dispatch, d.IPCRequests, d.IPCDuration, d.SSEStreams, d.SSEDropped, d.TokenRotations, d.StoreBatch, d.StoreCommit)
	return d
}
