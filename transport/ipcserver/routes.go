package ipcserver

import (
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// Protocol names the broker wire protocol this daemon speaks.
const Protocol = "claudemesh-ws/1"

// ipcFeatures are the capabilities GET /v1/version advertises.
var ipcFeatures = []string{"version", "health", "send", "outbox", "events", "inbox", "peers", "profile", "metrics", "token_rotate",
	"sessions", "topics", "memory", "skills", "state", "locks", "nodes", "audit",
	"reservations", "mail", "inbox_search", "contacts", "web"}

type route struct {
	method string
	// path is matched exactly; a path ending in '/' matches one more
	// segment (DELETE /v1/sessions/<token>), which the handler reads, and
	// a segment "*" any one segment (POST /v1/inbox/<id>/ack).
	path    string
	access  access
	handler func(*Server, http.ResponseWriter, *http.Request)
}

// access says which listeners serve a route (the gate has already
// authenticated TCP callers).
type access int

const (
	anyListener access = iota
	unixOnly           // the socket's file permissions are the authority
)

// routes is the whole IPC surface, sorted by path.
var routes = []route{
	{http.MethodGet, "/v1/audit", anyListener, (*Server).auditList},
	{http.MethodGet, "/v1/contacts", anyListener, (*Server).contactsList},
	{http.MethodPost, "/v1/contacts/accept", anyListener, (*Server).contactsAccept},
	{http.MethodPost, "/v1/contacts/policy", anyListener, (*Server).contactsPolicy},
	{http.MethodPost, "/v1/contacts/refuse", anyListener, (*Server).contactsRefuse},
	{http.MethodGet, "/v1/contacts/requests", anyListener, (*Server).contactsRequests},
	{http.MethodGet, "/v1/events", anyListener, (*Server).events},
	{http.MethodGet, "/v1/health", anyListener, (*Server).health},
	{http.MethodDelete, "/v1/inbox", anyListener, (*Server).inboxDelete},
	{http.MethodGet, "/v1/inbox", anyListener, (*Server).inboxList},
	{http.MethodDelete, "/v1/inbox/", anyListener, (*Server).inboxDeleteOne},
	{http.MethodPost, "/v1/inbox/*/ack", anyListener, (*Server).inboxAck},
	{http.MethodGet, "/v1/inbox/search", anyListener, (*Server).inboxSearch},
	{http.MethodPost, "/v1/inbox/seen", anyListener, (*Server).inboxSeen},
	{http.MethodGet, "/v1/locks", anyListener, (*Server).lockList},
	{http.MethodPost, "/v1/locks/acquire", anyListener, (*Server).lockAcquire},
	{http.MethodPost, "/v1/locks/release", anyListener, (*Server).lockRelease},
	{http.MethodPost, "/v1/locks/renew", anyListener, (*Server).lockRenew},
	{http.MethodDelete, "/v1/memory", anyListener, (*Server).memoryForget},
	{http.MethodGet, "/v1/memory", anyListener, (*Server).memoryRecall},
	{http.MethodPost, "/v1/memory", anyListener, (*Server).memoryRemember},
	{http.MethodDelete, "/v1/memory/", anyListener, (*Server).memoryForget},
	{http.MethodGet, "/v1/metrics", anyListener, (*Server).metricsText},
	{http.MethodGet, "/v1/nodes", anyListener, (*Server).nodes},
	{http.MethodGet, "/v1/outbox", anyListener, (*Server).outboxList},
	{http.MethodPost, "/v1/outbox/drop", anyListener, (*Server).outboxDrop},
	{http.MethodPost, "/v1/outbox/requeue", anyListener, (*Server).outboxRequeue},
	{http.MethodGet, "/v1/peers", anyListener, (*Server).peers},
	{http.MethodGet, "/v1/profile", anyListener, (*Server).ownProfiles},
	{http.MethodPost, "/v1/profile", anyListener, (*Server).profile},
	{http.MethodGet, "/v1/reservations", anyListener, (*Server).reservationList},
	{http.MethodPost, "/v1/reservations", anyListener, (*Server).reserve},
	{http.MethodPost, "/v1/reservations/check", anyListener, (*Server).checkReservations},
	{http.MethodPost, "/v1/reservations/release", anyListener, (*Server).releaseReservations},
	{http.MethodPost, "/v1/send", anyListener, (*Server).send},
	{http.MethodGet, "/v1/sessions", anyListener, (*Server).sessionsList},
	{http.MethodDelete, "/v1/sessions/", anyListener, (*Server).sessionsDelete},
	{http.MethodGet, sessionMePath, anyListener, (*Server).sessionsMe},
	{http.MethodPost, "/v1/sessions/register", anyListener, (*Server).sessionsRegister},
	{http.MethodGet, "/v1/skills", anyListener, (*Server).skillsList},
	{http.MethodPost, "/v1/skills", anyListener, (*Server).skillsPublish},
	{http.MethodDelete, "/v1/skills/", anyListener, (*Server).skillsRemove},
	{http.MethodGet, "/v1/skills/", anyListener, (*Server).skillsGet},
	{http.MethodGet, "/v1/state", anyListener, (*Server).stateGet},
	{http.MethodPost, "/v1/state", anyListener, (*Server).stateSet},
	{http.MethodPost, "/v1/token/rotate", unixOnly, (*Server).rotateToken},
	{http.MethodGet, "/v1/topics", anyListener, (*Server).topicsList},
	{http.MethodPost, "/v1/topics", anyListener, (*Server).topicsCreate},
	{http.MethodGet, "/v1/topics/history", anyListener, (*Server).topicsHistory},
	{http.MethodPost, "/v1/topics/join", anyListener, (*Server).topicsJoin},
	{http.MethodPost, "/v1/topics/leave", anyListener, (*Server).topicsLeave},
	{http.MethodGet, "/v1/topics/members", anyListener, (*Server).topicsMembers},
	{http.MethodGet, "/v1/version", anyListener, (*Server).version},
	{http.MethodPost, "/v1/web/login", anyListener, (*Server).webLogin},
}

// route finds the handler for r: 404 for an unknown path, 405 with Allow for
// a known path and another method. Paths are matched as sent (escaped), so
// that an id with an escaped '/' stays one segment; the handlers read the
// id from the unescaped path.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	var allow []string
	path := r.URL.EscapedPath()
	for _, rt := range routes {
		if !rt.matches(path) {
			continue
		}
		if rt.method == r.Method || (rt.method == http.MethodGet && r.Method == http.MethodHead) {
			if unix, _ := r.Context().Value(transportKey{}).(bool); rt.access == unixOnly && !unix {
				writeError(w, &messages.Error{Status: http.StatusForbidden, Code: "unix_socket_only",
					Detail: r.URL.Path + " is served on the daemon's Unix socket only"})
				return
			}
			rt.handler(s, w, r)
			return
		}
		allow = append(allow, rt.method)
	}
	if allow == nil {
		writeError(w, &messages.Error{Status: http.StatusNotFound, Code: "not_found", Detail: "no route " + r.URL.Path})
		return
	}
	sort.Strings(allow)
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, &messages.Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
		Detail: r.Method + " is not allowed on " + r.URL.Path})
}

// matches reports whether path is this route's: the same, or for a path
// ending in '/', one non-empty segment more.
func (rt *route) matches(path string) bool {
	if strings.Contains(rt.path, "/*/") {
		want, got := strings.Split(rt.path, "/"), strings.Split(path, "/")
		if len(want) != len(got) {
			return false
		}
		for i := range want {
			if want[i] != got[i] && (want[i] != "*" || got[i] == "") {
				return false
			}
		}
		return true
	}
	if !strings.HasSuffix(rt.path, "/") {
		return rt.path == path
	}
	rest, ok := strings.CutPrefix(path, rt.path)
	return ok && rest != "" && !strings.Contains(rest, "/")
}

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
