package ipcserver

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/claudemesh/claudemesh-go/messages"
)

// metricsText answers GET /v1/metrics in the Prometheus text format. The
// state gauges (connection, lag, outbox depth, send pacing) are read from
// the actors first, as GET /v1/health reads them; a scrape holds scrapeMu
// so that two scrapes never interleave their reset and set.
func (s *Server) metricsText(w http.ResponseWriter, r *http.Request) {
	s.scrapeMu.Lock()
	defer s.scrapeMu.Unlock()
	h, err := s.currentHealth()
	if err != nil {
		writeError(w, err)
		return
	}
	m := s.metrics
	m.OutboxDepth.Reset()
	m.Connected.Reset()
	m.Lag.Reset()
	m.SendPaused.Reset()
	m.SendPace.Reset()
	m.DestBackoff.Reset()
	now := time.Now()
	for _, mh := range h.Meshes {
		m.OutboxDepth.WithLabelValues(mh.Mesh, messages.StatusPending).Set(float64(mh.QueueDepth))
		m.OutboxDepth.WithLabelValues(mh.Mesh, messages.StatusInflight).Set(float64(mh.Inflight))
		m.OutboxDepth.WithLabelValues(mh.Mesh, messages.StatusDead).Set(float64(mh.Dead))
		connected := 0.0
		if mh.Connected {
			connected = 1
		}
		m.Connected.WithLabelValues(mh.Mesh).Set(connected)
		m.Lag.WithLabelValues(mh.Mesh).Set(float64(mh.LagMs) / 1000)
		paused := 0.0
		if until, err := time.Parse(time.RFC3339Nano, mh.SendPace.PausedUntil); err == nil {
			paused = max(until.Sub(now).Seconds(), 0)
		}
		m.SendPaused.WithLabelValues(mh.Mesh).Set(paused)
		m.SendPace.WithLabelValues(mh.Mesh).Set(float64(mh.SendPace.PaceMs) / 1000)
		m.DestBackoff.WithLabelValues(mh.Mesh).Set(float64(mh.SendPace.DestinationBackoffs))
	}
	promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}
