package ipcserver

import (
	"context"
	"net/http"

	"github.com/claudemesh/claudemesh-go/messages"
)

// serveWeb hands the web view its paths, on the TCP listener only (a
// browser reaches no Unix socket); the gate has checked the Host, the view
// checks the rest (its cookie, Origin, CSRF).
func (s *Server) serveWeb(w http.ResponseWriter, r *http.Request) {
	if unix, _ := r.Context().Value(transportKey{}).(bool); unix {
		writeError(w, &messages.Error{Status: http.StatusNotFound, Code: "not_found",
			Detail: "the web view is served on the daemon's loopback TCP port, not on its socket (see `claudemesh web`)"})
		return
	}
	s.web.ServeHTTP(w, r)
}

// serveLocal is the API as the web view calls it: a trusted local caller,
// as one on the Unix socket is (the view has signed its browser in).
func (s *Server) serveLocal(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(context.WithValue(r.Context(), transportKey{}, true))
	r.Host = "localhost"
	s.ServeHTTP(w, r)
}

// secrets are the bearer tokens in force, current first: the web view
// signs its cookies with them, so a rotation signs every browser out once
// the previous token's grace ends.
func (s *Server) secrets() [][]byte {
	t := s.tokens.Load()
	out := [][]byte{t.current}
	if t.previous != nil && s.opts.now().Before(t.previousUntil) {
		out = append(out, t.previous)
	}
	return out
}

// webLogin answers POST /v1/web/login: a one-time link that signs a browser
// in to the web view (`claudemesh web` asks for it).
func (s *Server) webLogin(w http.ResponseWriter, r *http.Request) {
	if s.opts.TCPAddr == "" {
		writeError(w, &messages.Error{Status: http.StatusConflict, Code: "web_unavailable",
			Detail: "the web view is served on the daemon's loopback TCP port, which is off: restart the daemon with it on " +
				"(`claudemesh daemon down`, then `claudemesh daemon up --tcp 127.0.0.1:0`, or [ipc] tcp_enabled = true in its config.toml)"})
		return
	}
	login, err := s.web.NewLogin("http://" + s.opts.TCPAddr)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, login)
}
