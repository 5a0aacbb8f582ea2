package ipcserver

import (
	"errors"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// The daemon's own status: GET /v1/version (what it is and what it
// offers) and GET /v1/health (how it fares: the outbox, disk pressure,
// each mesh's broker connection). Both are probes (server.go): they answer
// however busy the daemon is.

// Protocol names the broker wire protocol this daemon speaks.
const Protocol = "claudemesh-ws/1"

// ipcFeatures are the capabilities GET /v1/version advertises: each names
// a family of routes (TestRoutesAndFeatures), which a client asks only of
// a daemon that lists it.
var ipcFeatures = []string{"version", "health", "send", "outbox", "events", "inbox", "peers", "profile", "metrics", "token_rotate",
	"sessions", "topics", "memory", "skills", "state", "locks", "nodes", "audit",
	"reservations", "mail", "inbox_search", "contacts", "web"}

// version answers GET /v1/version: what this daemon is, the ipc features
// and broker protocol it speaks, its meshes and their negotiated broker
// features, and the last reload.
func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	v := &messages.Version{
		DaemonVersion: s.opts.DaemonVersion, IPCAPI: "v1", IPCFeatures: ipcFeatures, Protocol: Protocol,
		SchemaVersion: s.opts.SchemaVersion, BrokerFeaturesNegotiated: []string{}, PID: os.Getpid(),
	}
	for _, m := range s.Memberships() {
		info := m.Info
		info.BrokerFeatures = s.opts.Features.Of(info.Mesh)
		for _, f := range info.BrokerFeatures {
			if !slices.Contains(v.BrokerFeaturesNegotiated, f) {
				v.BrokerFeaturesNegotiated = append(v.BrokerFeaturesNegotiated, f)
			}
		}
		v.Meshes = append(v.Meshes, info)
	}
	slices.Sort(v.BrokerFeaturesNegotiated)
	if len(v.Meshes) > 0 {
		v.Mesh, v.MemberPubkey = v.Meshes[0].Mesh, v.Meshes[0].MemberPubkey
	}
	s.meshMu.RLock()
	v.Reload = s.reload
	s.meshMu.RUnlock()
	writeJSON(w, http.StatusOK, v)
}

// NoteReload records the outcome of a SIGHUP reload for GET /v1/version
// (err nil: config.toml applied).
func (s *Server) NoteReload(err error) {
	r := &messages.ReloadStatus{At: time.Now().UTC().Format(time.RFC3339Nano), OK: err == nil}
	if err != nil {
		r.Error = err.Error()
	}
	s.meshMu.Lock()
	if s.reload != nil {
		r.Seq = s.reload.Seq
	}
	r.Seq++
	s.reload = r
	s.meshMu.Unlock()
}

// health answers GET /v1/health (currentHealth).
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h, err := s.currentHealth()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// currentHealth asks the store for the outbox counts and each mesh's
// connection for its state.
func (s *Server) currentHealth() (*messages.Health, error) {
	counts, err := ask[*messages.OutboxCounts](s, s.opts.Store, &messages.OutboxStats{})
	if err != nil {
		return nil, err
	}
	h := &messages.Health{OK: true, PID: os.Getpid(), UptimeS: int64(time.Since(s.opts.Started).Seconds()),
		DaemonVersion: s.opts.DaemonVersion, SchemaVersion: s.opts.SchemaVersion, DiskPressure: persistence.PressureNormal.String(),
		FsyncMode: s.opts.Fsync.Mode().String()}
	if s.opts.Pressure != nil {
		h.DiskPressure = s.opts.Pressure.Level().String()
		h.Degraded = s.opts.Pressure.Level() == persistence.PressureDegraded
	}
	if counts.SyncBroken != "" {
		h.WALSyncFailed, h.Degraded = counts.SyncBroken, true
	}
	for _, m := range s.Memberships() {
		c := counts.ByMesh[m.Info.Mesh]
		h.Meshes = append(h.Meshes, messages.MeshHealth{Mesh: m.Info.Mesh, MemberPubkey: m.Info.MemberPubkey,
			QueueDepth: c[messages.StatusPending], Inflight: c[messages.StatusInflight], Dead: c[messages.StatusDead]})
	}
	if s.opts.Hooks != nil {
		h.Hooks = s.opts.Hooks.Health()
	}
	return s.withMeshStatus(h), nil
}

// healthStatusTimeout bounds how long GET /v1/health waits for a mesh's
// broker connection to report its state.
const healthStatusTimeout = 2 * time.Second

// withMeshStatus asks every mesh's broker connection for its state and
// returns h with the connection fields filled in; a connection that does not
// answer is reported as not connected, breaker "unknown".
func (s *Server) withMeshStatus(h *messages.Health) *messages.Health {
	slugs := make([]string, len(h.Meshes))
	for i, m := range h.Meshes {
		slugs[i] = m.Mesh
	}
	statuses, errs := perMesh(slugs, func(slug string) (*messages.MeshStatusReply, error) {
		pid, err := s.meshActor(slug)
		if err != nil {
			return nil, errors.New("no broker connection")
		}
		return askWithin[*messages.MeshStatusReply](s, pid, &messages.MeshStatus{}, healthStatusTimeout)
	})
	for i := range h.Meshes {
		m := &h.Meshes[i]
		m.Breaker = "unknown"
		if errs[i] == nil {
			m.Connected, m.Breaker, m.LagMs, m.Revoked = statuses[i].Connected, statuses[i].Breaker, statuses[i].LagMs, statuses[i].Revoked
			m.SendPace = statuses[i].Pace
		}
	}
	return h
}
