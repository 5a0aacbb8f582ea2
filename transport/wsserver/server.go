// Package wsserver is the broker's HTTP face: the WebSocket endpoint at
// exactly /ws, /health, and whatever other handlers the broker mounts (the
// join endpoint). Each accepted WebSocket is a Conn with a reader goroutine
// handing frames, in order, to the Session the broker opened for it, and a
// writer goroutine draining a bounded queue, sending pings and enforcing the
// liveness deadline. Until the broker calls Authenticated a connection is
// pending: it has Limits.HelloTimeout to get there, and the pending
// connections of one source address, and of all, are capped. It knows
// nothing of the protocol's meaning.
package wsserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/messages/fifo"
	"github.com/claudemesh/claudemesh-go/transport/cork"
)

// Liveness and limits (wire protocol §1.7).
const (
	PingInterval = 30 * time.Second
	// ReadTimeout drops a connection that sent nothing (frame or pong) for
	// this long.
	ReadTimeout  = 75 * time.Second
	WriteTimeout = 10 * time.Second
	// MaxFrameBytes bounds one incoming frame; a larger one closes the
	// connection with 1009.
	MaxFrameBytes = 256 << 10
	// OutQueue bounds the frames waiting for a slow client; past it the
	// connection is closed (1013) rather than let memory grow.
	OutQueue = 4096
)

// Defaults of Limits.
const (
	// HelloTimeout is how long a connection may stay unauthenticated.
	HelloTimeout = 5 * time.Second
	// PendingPerSource caps the unauthenticated connections of one source
	// IP address (a reverse proxy in front of the broker is one source;
	// loopback sources are exempt unless Limits.CapLoopback).
	PendingPerSource = 32
	// Pending caps the unauthenticated connections of all sources.
	Pending = 1024
	// CloseHelloTimeout is the close code of a connection that did not
	// authenticate in time (policy violation), with reason "hello_timeout".
	CloseHelloTimeout = 1008
)

// Limits bound the connections that have not authenticated (Conn.Authenticated)
// yet, and set how often every connection is pinged; zero fields take the
// defaults above.
type Limits struct {
	// HelloTimeout closes a connection still unauthenticated this long
	// after its upgrade with 1008 "hello_timeout".
	HelloTimeout time.Duration
	// PendingPerSource and Pending cap the unauthenticated connections of
	// one source IP and of all — every connection of HTTPServer from its
	// accept, a WebSocket until its hello; a request past either is
	// answered 429 with Retry-After.
	PendingPerSource int
	Pending          int
	// IdleTimeout closes a connection of HTTPServer idle between requests
	// (0: IdleTimeout).
	IdleTimeout time.Duration
	// CapLoopback applies PendingPerSource to loopback sources too. Off,
	// local clients (a daemon's embedded broker serves only them, and a
	// reverse proxy on the same host makes every client one) are bounded
	// by Pending alone.
	CapLoopback bool
	// PingInterval is how often each connection is pinged (0:
	// PingInterval); the pong answering a ping is the connection's
	// heartbeat (Heartbeat).
	PingInterval time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.HelloTimeout <= 0 {
		l.HelloTimeout = HelloTimeout
	}
	if l.PendingPerSource <= 0 {
		l.PendingPerSource = PendingPerSource
	}
	if l.Pending <= 0 {
		l.Pending = Pending
	}
	if l.PingInterval <= 0 {
		l.PingInterval = PingInterval
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = IdleTimeout
	}
	return l
}

// Session receives one connection's events. Frame is called from the
// reader goroutine, one frame at a time, in arrival order; Closed exactly
// once, after the last Frame.
type Session interface {
	Frame(data []byte)
	Closed(err error)
}

// Heartbeat is a Session that wants the connection's heartbeats: Beat is
// called from the reader goroutine when the pong answering the server's
// latest ping arrives — once per ping at most, however many pongs the
// client sends.
type Heartbeat interface {
	Beat()
}

// Opener opens the Session of a new connection.
type Opener func(c *Conn) Session

// Server is the broker's HTTP handler.
type Server struct {
	open     Opener
	mux      *http.ServeMux
	log      *slog.Logger
	upgrader websocket.Upgrader

	limits Limits

	mu    sync.Mutex
	conns map[*Conn]struct{}
	// pending counts the unauthenticated connections by source address,
	// and pendingAll all of them.
	pending    map[string]int
	pendingAll int
	// httpConns are the connections of HTTPServer, by their net.Conn,
	// until they close or are hijacked (httpconns.go).
	httpConns map[net.Conn]*httpConn
	// closed is set by Shutdown; upgrading counts the upgrades begun
	// before it, which Shutdown waits for (an HTTP server's shutdown does
	// not wait for a handler whose connection it has handed over).
	closed    bool
	upgrading sync.WaitGroup
}

// New returns a server that opens a Session per WebSocket and serves
// health at /health; extra handlers are mounted at their patterns.
func New(open Opener, health func() any, extra map[string]http.Handler, limits Limits, log *slog.Logger) *Server {
	s := &Server{open: open, mux: http.NewServeMux(), log: log, conns: map[*Conn]struct{}{},
		limits: limits.withDefaults(), pending: map[string]int{}, httpConns: map[net.Conn]*httpConn{},
		// Write buffers come from a pool and are held only during a write: an
		// idle connection (most of an agent session's life) holds none.
		upgrader: websocket.Upgrader{ReadBufferSize: 4 << 10, WriteBufferSize: 16 << 10, WriteBufferPool: &sync.Pool{},
			CheckOrigin: func(*http.Request) bool { return true }}} // clients are daemons, not browsers; auth is in-band
	s.mux.HandleFunc("/ws", s.upgrade)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(health())
	})
	for pattern, h := range extra {
		s.mux.Handle(pattern, h)
	}
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.admitted(w, r) {
		s.mux.ServeHTTP(w, r)
	}
}

// Shutdown refuses new upgrades (503), waits for those under way to have
// opened their session, then closes every WebSocket with 1001 "going
// away" (after the frames already queued) and waits until they are closed
// or ctx ends. Once it has returned no session is opened any more, even by
// an upgrade that an HTTP server's shutdown left running (it does not wait
// for hijacked connections).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	upgraded := make(chan struct{})
	go func() { s.upgrading.Wait(); close(upgraded) }()
	select {
	case <-upgraded:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	open := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		c.Close(websocket.CloseGoingAway, "shutting down")
	}
	for _, c := range open {
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	if r.URL.RawQuery != "" {
		http.Error(w, "the WebSocket endpoint is /ws, without a query string", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.upgrading.Add(1) // under mu: never after Shutdown began to wait
	}
	s.mu.Unlock()
	if closed {
		http.Error(w, "the broker is shutting down; connect again shortly", http.StatusServiceUnavailable)
		return
	}
	defer s.upgrading.Done()
	release, ok := s.handOver(r)
	if !ok {
		s.refuse(w, sourceOf(r.RemoteAddr))
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.takeBack(r, release) // the connection goes on as HTTP
		return                 // the upgrader has answered
	}
	c := &Conn{ws: ws, out: fifo.New[outFrame](OutQueue), done: make(chan struct{}), Remote: r.RemoteAddr,
		pingEvery: s.limits.PingInterval}
	c.unpend = release
	c.cork, _ = ws.UnderlyingConn().(*cork.Conn)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	c.helloTimer = time.AfterFunc(s.limits.HelloTimeout, func() {
		if !c.authenticated.Load() {
			c.Close(CloseHelloTimeout, "hello_timeout")
		}
	})
	go func() {
		<-c.done
		c.helloTimer.Stop()
		c.unpend()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	sess := s.open(c)
	go c.write()
	go c.read(sess)
}

// sourceOf is the IP address of a remote address (host:port).
func sourceOf(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

func isLoopback(source string) bool {
	ip := net.ParseIP(source)
	return ip != nil && ip.IsLoopback()
}

// takePending counts a new unauthenticated connection from source, unless
// that would pass the cap of all or, with perSource, the source's.
func (s *Server) takePending(source string, perSource bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if perSource && s.pending[source] >= s.limits.PendingPerSource || s.pendingAll >= s.limits.Pending {
		return false
	}
	s.pending[source]++
	s.pendingAll++
	return true
}

// releasePending uncounts an unauthenticated connection from source.
func (s *Server) releasePending(source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[source]--; s.pending[source] <= 0 {
		delete(s.pending, source)
	}
	s.pendingAll--
}

// PendingCount is the number of connections awaiting authentication.
func (s *Server) PendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pendingAll
}

type outFrame struct {
	data  []byte
	close *closeFrame
}

type closeFrame struct {
	code   int
	reason string
}

// Conn is one WebSocket connection.
type Conn struct {
	ws     *websocket.Conn
	cork   *cork.Conn // under ws, when the listener was a cork.Listener
	out    *fifo.Queue[outFrame]
	done   chan struct{}
	once   sync.Once
	Remote string

	authenticated atomic.Bool
	helloTimer    *time.Timer
	unpend        func() // uncounts the connection as pending, once

	pingEvery time.Duration
	// pinged is the number of the latest ping (its payload), beat the
	// number of the latest ping whose pong was taken as a heartbeat.
	pinged, beat atomic.Uint64
}

// maxCoalesce bounds the frames the writer gathers into one write.
const maxCoalesce = 256

// writeQueued writes the queued frames, up to maxCoalesce at a time in one
// write (corked); false when the connection is done with (closed by a
// queued close frame, or a write failed).
func (c *Conn) writeQueued() bool {
	for {
		if c.cork != nil {
			c.cork.Cork()
		}
		n, ok, more := 0, true, false
		for f, popped := c.out.Pop(); popped; f, popped = c.out.Pop() {
			c.ws.SetWriteDeadline(time.Now().Add(WriteTimeout))
			if f.close != nil {
				c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(f.close.code, f.close.reason))
				ok = false
				break
			}
			if err := c.ws.WriteMessage(websocket.TextMessage, f.data); err != nil {
				ok = false
				break
			}
			if n++; n == maxCoalesce {
				more = true
				break
			}
		}
		if c.cork != nil {
			if err := c.cork.Uncork(); err != nil {
				ok = false
			}
		}
		if !ok || !more {
			return ok
		}
	}
}

// Authenticated marks the connection as past its hello: the hello
// deadline no longer applies and it no longer counts as pending.
func (c *Conn) Authenticated() {
	c.authenticated.Store(true)
	c.helloTimer.Stop()
	c.unpend()
}

// Send queues a text frame; it never blocks. It reports false when the
// connection is closed or its queue is full (the connection is then being
// closed with 1013).
func (c *Conn) Send(data []byte) bool {
	select {
	case <-c.done:
		return false
	default:
	}
	if c.out.Push(outFrame{data: data}) {
		return true
	}
	c.Close(websocket.CloseTryAgainLater, "client too slow")
	return false
}

// Close sends a close frame with code and reason (at most 123 bytes) after
// the frames already queued, then closes the connection.
func (c *Conn) Close(code int, reason string) {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	if !c.out.Push(outFrame{close: &closeFrame{code, reason}}) {
		c.shutdown() // queue full: no room even for the close frame
	}
}

func (c *Conn) shutdown() {
	c.once.Do(func() {
		close(c.done)
		c.ws.Close()
	})
}

func (c *Conn) read(sess Session) {
	defer c.shutdown()
	c.ws.SetReadLimit(MaxFrameBytes)
	c.ws.SetReadDeadline(time.Now().Add(ReadTimeout))
	hb, _ := sess.(Heartbeat)
	c.ws.SetPongHandler(func(data string) error {
		if hb != nil {
			if n, err := strconv.ParseUint(data, 10, 64); err == nil && n == c.pinged.Load() && c.beat.Swap(n) != n {
				hb.Beat()
			}
		}
		return c.ws.SetReadDeadline(time.Now().Add(ReadTimeout))
	})
	var err error
	for {
		var kind int
		var data []byte
		kind, data, err = c.ws.ReadMessage()
		if err != nil {
			break
		}
		c.ws.SetReadDeadline(time.Now().Add(ReadTimeout))
		if kind == websocket.TextMessage || kind == websocket.BinaryMessage {
			sess.Frame(data)
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = errors.New("no frame or pong for " + ReadTimeout.String())
	}
	sess.Closed(err)
}

func (c *Conn) write() {
	ping := time.NewTicker(c.pingEvery)
	defer ping.Stop()
	defer c.shutdown()
	for {
		select {
		case <-c.done:
			return
		case <-c.out.Ready():
			if !c.writeQueued() {
				return
			}
		case <-ping.C:
			n := strconv.FormatUint(c.pinged.Add(1), 10)
			if err := c.ws.WriteControl(websocket.PingMessage, []byte(n), time.Now().Add(WriteTimeout)); err != nil {
				return
			}
		}
	}
}
