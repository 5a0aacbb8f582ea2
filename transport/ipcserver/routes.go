package ipcserver

import (
	"net/http"
	"sort"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
)

// The route table, the whole IPC surface, and its matcher, which the gate
// (server.go) hands every request it lets through. Each route family is
// advertised as an ipc feature (status.go; TestRoutesAndFeatures).

// route is one entry of the table: a method and path, the listeners that
// serve it, and its handler.
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
