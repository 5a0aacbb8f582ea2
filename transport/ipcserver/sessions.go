package ipcserver

import (
	"context"
	"net/http"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Session is a registered agent session as the IPC surface needs it: its
// route (the served mesh entry, named RouteOf(mesh, id), that speaks as the
// session's key) and the mesh it belongs to.
type Session struct {
	Token string
	Mesh  string // the member mesh's slug
	Route string
	Info  messages.SessionInfo
}

// RouteOf names the served entry of session id on mesh. Mesh slugs have no
// '/', so a route never collides with a membership.
func RouteOf(mesh, id string) string { return mesh + "/" + id }

// Sessions is the daemon's session registry. Lookup is on every request
// that names a session and must not block.
type Sessions interface {
	Lookup(token string) *Session
	Register(ctx context.Context, req *messages.RegisterSession) (*messages.SessionRegistered, error)
	Deregister(token string) (bool, error)
	List() []messages.SessionInfo
}

// SessionTokenHeader carries a session token beside a TCP caller's bearer
// (HTTP has one Authorization header); on the Unix socket
// `Authorization: ClaudeMesh-Session <token>` does the same.
const SessionTokenHeader = "X-ClaudeMesh-Session"

type sessionKey struct{}

// sessionToken is the session token a request presents, "" for none.
func sessionToken(r *http.Request) string {
	if tok := r.Header.Get(SessionTokenHeader); tok != "" {
		return tok
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if ok && strings.EqualFold(scheme, messages.SessionHeader) {
		return strings.TrimSpace(tok)
	}
	return ""
}

// withSession resolves the session a request names. A malformed or unknown
// token is refused (401): acting as no session would show the caller every
// session's messages. The routes that manage sessions take unknown tokens.
func (s *Server) withSession(r *http.Request) (*http.Request, error) {
	tok := sessionToken(r)
	if tok == "" || s.opts.Sessions == nil || strings.HasPrefix(r.URL.Path, "/v1/sessions/") && r.URL.Path != sessionMePath {
		return r, nil
	}
	if !messages.ValidSessionToken(tok) {
		return nil, &messages.Error{Status: http.StatusUnauthorized, Code: "invalid_session_token",
			Detail: "a session token is 64 hex characters"}
	}
	sess := s.opts.Sessions.Lookup(strings.ToLower(tok))
	if sess == nil {
		return nil, &messages.Error{Status: http.StatusUnauthorized, Code: messages.CodeSessionUnknown,
			Detail: "no session is registered with this token (it ended or its process is gone): register it again with POST /v1/sessions/register"}
	}
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)), nil
}

var errNoSessions = &messages.Error{Status: http.StatusNotImplemented, Code: "sessions_unavailable",
	Detail: "this server keeps no session registry"}

const sessionMePath = "/v1/sessions/me"

func (s *Server) sessionsRegister(w http.ResponseWriter, r *http.Request) {
	if s.opts.Sessions == nil {
		writeError(w, errNoSessions)
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer bufPool.Put(body)
	var req messages.RegisterSession
	if err := messages.DecodeJSON(body.Bytes(), &req); err != nil {
		writeError(w, err)
		return
	}
	if err := req.Validate(); err != nil {
		writeError(w, err)
		return
	}
	if _, err := s.mesh(req.Mesh); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.opts.Sessions.Register(r.Context(), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) sessionsDelete(w http.ResponseWriter, r *http.Request) {
	if s.opts.Sessions == nil {
		writeError(w, errNoSessions)
		return
	}
	tok := strings.ToLower(strings.TrimPrefix(r.URL.Path, "/v1/sessions/"))
	if !messages.ValidSessionToken(tok) {
		writeError(w, &messages.Error{Status: http.StatusBadRequest, Code: "invalid_session_token",
			Detail: "DELETE /v1/sessions/<token>: the token is 64 hex characters"})
		return
	}
	found, err := s.opts.Sessions.Deregister(tok)
	if err != nil {
		writeError(w, err)
		return
	}
	res := &messages.SessionDeregistered{OK: found, TokenPrefix: tok[:8]}
	if !found {
		writeJSON(w, http.StatusNotFound, res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) sessionsMe(w http.ResponseWriter, r *http.Request) {
	sess := sessionOf(r)
	if sess == nil {
		writeError(w, &messages.Error{Status: http.StatusUnauthorized, Code: "no_session_token",
			Detail: "GET /v1/sessions/me needs Authorization: ClaudeMesh-Session <token>"})
		return
	}
	writeJSON(w, http.StatusOK, &messages.SessionMe{Session: sess.Info})
}

func (s *Server) sessionsList(w http.ResponseWriter, r *http.Request) {
	if s.opts.Sessions == nil {
		writeError(w, errNoSessions)
		return
	}
	list := s.opts.Sessions.List()
	if list == nil {
		list = []messages.SessionInfo{}
	}
	writeJSON(w, http.StatusOK, &messages.SessionList{Sessions: list})
}
