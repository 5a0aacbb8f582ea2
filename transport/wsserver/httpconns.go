package wsserver

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Timeouts of the HTTP face (HTTPServer): a request's headers, a whole
// request, a response, and (the default of Limits.IdleTimeout) a
// keep-alive connection between requests. A WebSocket leaves them at its
// upgrade (the upgrader clears the deadlines) for its own liveness
// deadline.
const (
	HeaderTimeout  = 10 * time.Second
	RequestTimeout = 30 * time.Second
	IdleTimeout    = 30 * time.Second
)

// Every connection to the HTTP face counts as unauthenticated from its
// accept, against the same caps as an upgraded WebSocket awaiting its
// hello: a request on a connection accepted past them is answered 429 and
// the connection closed, and one that stays idle is closed after
// IdleTimeout. An upgrade hands the connection's count to its WebSocket,
// which gives it back at its hello (Conn.Authenticated) or its close.

// httpConn is one accepted connection's count.
type httpConn struct {
	source  string
	counted bool // taken from the caps (false: accepted past them)
	handed  bool // counted, and handed to its WebSocket
}

type httpConnKey struct{}

// HTTPServer is an http.Server for s with the face's timeouts, counting
// each connection (ConnState) from its accept.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s, ReadHeaderTimeout: HeaderTimeout, ReadTimeout: RequestTimeout, WriteTimeout: RequestTimeout,
		IdleTimeout: s.limits.IdleTimeout, ConnState: s.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, httpConnKey{}, s.trackConn(c))
		}}
}

// trackConn counts a new connection, if the caps allow.
func (s *Server) trackConn(c net.Conn) *httpConn {
	source := sourceOf(c.RemoteAddr().String())
	hc := &httpConn{source: source, counted: s.takePending(source, s.limits.CapLoopback || !isLoopback(source))}
	s.mu.Lock()
	s.httpConns[c] = hc
	s.mu.Unlock()
	return hc
}

// connState gives a connection's count back when it closes; a hijacked
// one's went to its WebSocket.
func (s *Server) connState(c net.Conn, state http.ConnState) {
	if state != http.StateClosed && state != http.StateHijacked {
		return
	}
	s.mu.Lock()
	hc := s.httpConns[c]
	delete(s.httpConns, c)
	s.mu.Unlock()
	if hc != nil && hc.counted && !hc.handed {
		s.releasePending(hc.source)
	}
}

// admitted reports whether r's connection is within the caps, answering
// 429 and closing it when it is not. A request served by another
// http.Server (no count) is admitted.
func (s *Server) admitted(w http.ResponseWriter, r *http.Request) bool {
	hc, _ := r.Context().Value(httpConnKey{}).(*httpConn)
	if hc == nil || hc.counted {
		return true
	}
	w.Header().Set("Connection", "close")
	s.refuse(w, hc.source)
	return false
}

// refuse answers a request past the caps of unauthenticated connections.
func (s *Server) refuse(w http.ResponseWriter, source string) {
	s.log.Warn("ws_pending_cap", "source", source, "per_source", s.limits.PendingPerSource, "all", s.limits.Pending)
	w.Header().Set("Retry-After", "5")
	http.Error(w, "too many connections awaiting their hello (from this address, or in all); retry later", http.StatusTooManyRequests)
}

// handOver gives r's connection's count to the WebSocket it is being
// upgraded to, and returns how that WebSocket gives it back; a connection
// no count was taken for (another http.Server's) takes one now, or is
// refused (false).
func (s *Server) handOver(r *http.Request) (release func(), ok bool) {
	source := sourceOf(r.RemoteAddr)
	hc, _ := r.Context().Value(httpConnKey{}).(*httpConn)
	if hc == nil && !s.takePending(source, s.limits.CapLoopback || !isLoopback(source)) {
		return nil, false
	}
	if hc != nil {
		s.mu.Lock()
		hc.handed = true
		s.mu.Unlock()
	}
	return sync.OnceFunc(func() { s.releasePending(source) }), true
}

// takeBack undoes handOver for an upgrade that failed: the connection
// keeps its count until it closes, or one taken for it is given back.
func (s *Server) takeBack(r *http.Request, release func()) {
	hc, _ := r.Context().Value(httpConnKey{}).(*httpConn)
	if hc == nil {
		release()
		return
	}
	s.mu.Lock()
	hc.handed = false
	s.mu.Unlock()
}
