// Package ipcserver is the daemon's local API: one HTTP handler served on
// the Unix socket (no auth: the socket's 0600 mode is the boundary) and on a
// loopback TCP port (Authorization: Bearer <local-token>, compared in
// constant time). Its client is package ipc.
//
// ServeHTTP is one gate and one table. In order: a token in the query string
// is refused (400), the Host must be loopback (403), an Origin not in the
// allowlist (default: empty) is refused (403), OPTIONS is refused (403), TCP
// callers must present the bearer (401; GET /v1/health is exempt when
// public_health_check is on), the body is read whole within BodyTimeout
// (408 body_timeout; it holds no request slot while it arrives), at most
// DefaultMaxInflight requests run at once (429 daemon_busy; GET /v1/events is
// bounded by the events actor instead, and the probes — GET /v1/health,
// /v1/version, /v1/metrics — have DefaultProbeReserve slots of their own, so
// that they answer however busy the daemon is), then the route table answers
// (404/405 envelopes for unknown paths and methods). Handlers decode,
// validate, send one message to an actor and render; they never touch SQLite.
//
// Shutdown ends what would hold a stop: bodies still arriving are answered
// 503 daemon_stopping, connections that have not sent a whole request yet
// are closed, event streams end; requests already running finish.
package ipcserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
	"github.com/claudemesh/claudemesh-go/transport/web"
)

// Defaults of the IPC surface (spec §3.4).
const (
	DefaultMaxInflight    = 64
	DefaultMaxBodyBytes   = 1 << 20
	DefaultRequestTimeout = 15 * time.Second
	// DefaultBodyTimeout bounds how long a request body may take to arrive
	// once its headers have (local clients send theirs in microseconds).
	DefaultBodyTimeout = 10 * time.Second
	// DefaultProbeReserve is the number of slots kept for the probes
	// beside the DefaultMaxInflight every request shares.
	DefaultProbeReserve = 16
)

// Mesh is a joined mesh as the IPC surface needs it: who we are there and
// the key that seals DMs.
type Mesh struct {
	Info     messages.MeshInfo
	Identity *meshcrypto.Identity
	// Parent is, for an agent session's route, the slug of the membership
	// it belongs to ("" for a membership). Routes are served like meshes
	// but only a session's own requests reach them.
	Parent string
	// Name is the display name this identity goes by, which its receipts
	// carry.
	Name string
}

// Options configure a Server.
type Options struct {
	Token         string // bearer for TCP callers
	Root          *actor.RootContext
	Store         *actor.PID
	Accept        *actor.PID
	Meshes        []Mesh
	DaemonVersion string
	SchemaVersion int
	Started       time.Time
	// OriginAllowlist are the Origin values allowed to call the API
	// ([ipc] origin_allowlist); any other Origin is refused.
	OriginAllowlist []string
	// PublicHealth lets GET /v1/health over TCP answer without the token
	// ([ipc] public_health_check), e.g. for probes.
	PublicHealth bool
	Log          *slog.Logger
	// Events is the events actor (GET /v1/events).
	Events *actor.PID
	// MeshActors maps a mesh slug to that mesh's broker-connection actor
	// (GET /v1/peers, POST /v1/profile, GET /v1/health).
	MeshActors map[string]*actor.PID
	// Metrics are the daemon's series, served at GET /v1/metrics (nil: a
	// set of the server's own).
	Metrics *metrics.Daemon
	// Pressure, when set, is the outbox's disk pressure: at
	// persistence.PressureRefuse, POST /v1/send answers 507
	// insufficient_storage without writing anything; GET /v1/health
	// reports it.
	Pressure *persistence.Pressure
	// Fsync is [outbox] fsync_mode, reported by GET /v1/health (nil: strict).
	Fsync *config.FsyncPolicy
	// Features are the broker features each mesh negotiated (GET
	// /v1/version; nil: none known).
	Features *messages.BrokerFeatures
	// Hooks reports the agent-hook outbox in GET /v1/health (nil: the
	// health has no hooks part).
	Hooks interface{ Health() *messages.HookHealth }
	// Sessions is the agent session registry (nil: the session routes
	// answer 501).
	Sessions Sessions
	// RotateToken mints and stores a new bearer token (POST
	// /v1/token/rotate); nil: the route answers 501.
	RotateToken func() (string, error)
	// TCPAddr is the loopback TCP listener's address ("" without one): the
	// web view is served there, and POST /v1/web/login's link names it.
	TCPAddr string
	// WebSignedIn is the file that keeps the web view's signed-in
	// browsers across restarts ("": in memory only).
	WebSignedIn string
	// BodyTimeout bounds the time a request body may take to arrive after
	// its headers (0: DefaultBodyTimeout); a body that is late is
	// answered 408 body_timeout.
	BodyTimeout time.Duration

	keepalive time.Duration    // SSE keepalive; 0: DefaultKeepalive (tests shorten it)
	now       func() time.Time // the token grace's clock; nil: time.Now (tests move it)
}

// Server is the IPC HTTP handler.
type Server struct {
	opts     Options
	metrics  *metrics.Daemon
	scrapeMu sync.Mutex
	meshMu   sync.RWMutex // guards opts.Meshes and opts.MeshActors (AddMesh), and reload
	reload   *messages.ReloadStatus
	tokens   atomic.Pointer[bearerTokens]
	tokenMu  sync.Mutex // one rotation at a time
	inflight chan struct{}
	probes   chan struct{} // the probes' own reserve
	replies  *replies
	names    peerDirectory // peer lists for sends by name (names.go)
	noted    contactsNoted // the contacts sends recorded (mail.go)
	http     *http.Server
	web      *web.View

	stopping atomic.Bool
	connMu   sync.Mutex
	fresh    map[net.Conn]struct{} // connections that have not sent a whole request yet
	reading  map[net.Conn]struct{} // connections whose request body is arriving
}

type (
	transportKey struct{}
	connKey      struct{}
)

// New returns a server for opts.
func New(opts Options) *Server {
	s := &Server{opts: opts, metrics: opts.Metrics, inflight: make(chan struct{}, DefaultMaxInflight),
		probes:  make(chan struct{}, DefaultProbeReserve),
		replies: newReplies(opts.Root.ActorSystem(), DefaultMaxInflight+DefaultProbeReserve+messages.MaxStreams),
		fresh:   map[net.Conn]struct{}{}, reading: map[net.Conn]struct{}{}}
	s.tokens.Store(&bearerTokens{current: []byte(opts.Token)})
	if s.metrics == nil {
		s.metrics = metrics.New()
	}
	if s.opts.now == nil {
		s.opts.now = time.Now
	}
	if s.opts.BodyTimeout <= 0 {
		s.opts.BodyTimeout = DefaultBodyTimeout
	}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(opts.Log.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			_, unix := c.(*net.UnixConn)
			return context.WithValue(context.WithValue(ctx, transportKey{}, unix), connKey{}, c)
		},
		ConnState: s.trackConn,
	}
	s.web = web.New(web.Options{API: http.HandlerFunc(s.serveLocal), Secrets: s.secrets, SignedInFile: opts.WebSignedIn,
		Log: opts.Log})
	s.http.RegisterOnShutdown(s.closeStreams)
	s.http.RegisterOnShutdown(s.stop)
	return s
}

// AddMesh serves a mesh attached while the daemon runs: m for sends, conn
// (its broker connection) for peers, profile and health.
func (s *Server) AddMesh(m Mesh, conn *actor.PID) {
	s.meshMu.Lock()
	defer s.meshMu.Unlock()
	s.opts.Meshes = append(slices.Clip(s.opts.Meshes), m)
	actors := make(map[string]*actor.PID, len(s.opts.MeshActors)+1)
	for slug, pid := range s.opts.MeshActors {
		actors[slug] = pid
	}
	actors[m.Info.Mesh] = conn
	s.opts.MeshActors = actors
}

// RemoveMesh stops serving a mesh that was detached.
func (s *Server) RemoveMesh(slug string) {
	s.meshMu.Lock()
	defer s.meshMu.Unlock()
	meshes := make([]Mesh, 0, len(s.opts.Meshes))
	for _, m := range s.opts.Meshes {
		if m.Info.Mesh != slug {
			meshes = append(meshes, m)
		}
	}
	actors := make(map[string]*actor.PID, len(s.opts.MeshActors))
	for k, pid := range s.opts.MeshActors {
		if k != slug {
			actors[k] = pid
		}
	}
	s.opts.Meshes, s.opts.MeshActors = meshes, actors
}

// MeshBySlug is the served mesh slug names, or a 404 *messages.Error.
func (s *Server) MeshBySlug(slug string) (*Mesh, error) {
	if slug == "" {
		return nil, &messages.Error{Status: http.StatusNotFound, Code: messages.CodeMeshNotAttached, Detail: "no mesh named"}
	}
	return s.mesh(slug)
}

// Meshes are the meshes served, as of now, sessions' routes included.
func (s *Server) Meshes() []Mesh {
	s.meshMu.RLock()
	defer s.meshMu.RUnlock()
	return s.opts.Meshes
}

// Memberships are the meshes served, without sessions' routes.
func (s *Server) Memberships() []Mesh {
	all := s.Meshes()
	out := make([]Mesh, 0, len(all))
	for _, m := range all {
		if m.Parent == "" {
			out = append(out, m)
		}
	}
	return out
}

// MembershipInfos is the MeshInfo of each of meshes (Memberships' or
// Meshes').
func MembershipInfos(meshes []Mesh) []messages.MeshInfo {
	infos := make([]messages.MeshInfo, len(meshes))
	for i := range meshes {
		infos[i] = meshes[i].Info
	}
	return infos
}

// Serve answers requests on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	err := s.http.Serve(l)
	if err == http.ErrServerClosed {
		return nil
	}
	return err
}

// Shutdown stops accepting connections, ends the bodies still arriving and
// the connections that have not sent a request, and waits for the running
// requests until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// Close closes every connection at once, running requests or not (what a
// Shutdown that ran out of time leaves).
func (s *Server) Close() error { return s.http.Close() }

// ServeHTTP counts every request (cm_daemon_ipc_requests_total, and the
// duration of all but event streams) and passes it through the gate.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	s.gate(sw, r)
	endpoint := endpointOf(r.URL.Path)
	transport := "tcp"
	if unix, _ := r.Context().Value(transportKey{}).(bool); unix {
		transport = "uds"
	}
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	s.metrics.IPCRequests.WithLabelValues(endpoint, strconv.Itoa(sw.status), transport).Inc()
	if r.URL.Path != eventsPath {
		s.metrics.IPCDuration.WithLabelValues(endpoint).Observe(time.Since(start).Seconds())
	}
}

// statusWriter remembers the status a handler wrote; Unwrap lets
// http.ResponseController reach the connection (event streams flush).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// endpointOf is the metrics label of a path: the route's path, or "other"
// (so that arbitrary paths cannot grow the series without bound).
func endpointOf(path string) string {
	for _, rt := range routes {
		if rt.matches(path) {
			return rt.path
		}
	}
	return "other"
}

// gate is what every request passes before its route.
func (s *Server) gate(w http.ResponseWriter, r *http.Request) {
	w.Header()["Cache-Control"] = noStore
	if r.URL.Query().Has("token") {
		s.opts.Log.Warn("ipc_token_in_query_string_rejected", "path", r.URL.Path, "remote", r.RemoteAddr)
		writeError(w, &messages.Error{Status: 400, Code: "token_in_query",
			Detail: "the token belongs in the Authorization header, never in the query string"})
		return
	}
	if !loopbackHost(r.Host) {
		writeError(w, &messages.Error{Status: 403, Code: "forbidden_host", Detail: "Host must be localhost, 127.0.0.1 or [::1]"})
		return
	}
	if r.URL.Path == web.Prefix || strings.HasPrefix(r.URL.Path, web.Prefix+"/") {
		s.serveWeb(w, r)
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(s.opts.OriginAllowlist, origin) {
		writeError(w, &messages.Error{Status: 403, Code: "forbidden_origin", Detail: "requests from browsers are refused"})
		return
	}
	if r.Method == http.MethodOptions {
		writeError(w, &messages.Error{Status: 403, Code: "forbidden_method", Detail: "CORS preflight is refused"})
		return
	}
	if unix, _ := r.Context().Value(transportKey{}).(bool); !unix && !s.authorized(r) && !s.publicHealth(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="claudemesh"`)
		writeError(w, &messages.Error{Status: 401, Code: "unauthorized",
			Detail: "missing or invalid bearer token (see local-token in the daemon directory)"})
		return
	}
	r, err := s.withSession(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if r, err = s.bufferBody(r); err != nil {
		w.Header().Set("Connection", "close") // what is left of the body must not be read as a request
		writeError(w, err)
		return
	}
	release, err := s.takeSlot(r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	s.route(w, r)
}

// Answers of the gate's own.
var (
	errBusy = &messages.Error{Status: http.StatusTooManyRequests, Code: messages.CodeDaemonBusy,
		Detail: "too many requests in flight; retry shortly"}
	errStopping = &messages.Error{Status: http.StatusServiceUnavailable, Code: "daemon_stopping",
		Detail: "the daemon is stopping; retry once it runs again"}
)

// bufferBody reads r's body whole (at most DefaultMaxBodyBytes) within
// BodyTimeout, before r takes a slot: a client that trickles its body holds
// a connection and a goroutine for BodyTimeout at most, never one of the
// slots the other requests need. The request returned reads the buffered
// body; net/http keeps the original (it was read to its end).
func (s *Server) bufferBody(r *http.Request) (*http.Request, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return r, nil
	}
	if r.ContentLength > DefaultMaxBodyBytes {
		return nil, tooLarge
	}
	conn, _ := r.Context().Value(connKey{}).(net.Conn)
	if err := s.watchBody(conn); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, DefaultMaxBodyBytes+1))
	stopping := s.unwatchBody(conn, err == nil && len(body) <= DefaultMaxBodyBytes)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && stopping:
		return nil, errStopping
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &messages.Error{Status: http.StatusRequestTimeout, Code: "body_timeout",
			Detail: "the request body did not arrive within " + s.opts.BodyTimeout.String() + "; send the whole body at once"}
	case err != nil:
		return nil, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidJSON, Detail: "reading body: " + err.Error()}
	case len(body) > DefaultMaxBodyBytes:
		return nil, tooLarge
	}
	buffered := r.WithContext(r.Context())
	buffered.Body = io.NopCloser(bytes.NewReader(body))
	return buffered, nil
}

// watchBody puts the body deadline on conn (nil: a connection of no
// listener of ours, in tests) and lists it for a stop to end.
func (s *Server) watchBody(conn net.Conn) error {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.stopping.Load() {
		return errStopping
	}
	if conn != nil {
		s.reading[conn] = struct{}{}
		conn.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	}
	return nil
}

// unwatchBody lifts the body deadline of a body read whole (net/http's
// background read of the connection must not meet it) and reports whether
// a stop has begun. After a failed read the deadline stays in the past:
// net/http would otherwise wait for the rest of the body before it closes
// the connection.
func (s *Server) unwatchBody(conn net.Conn, whole bool) (stopping bool) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if conn != nil {
		delete(s.reading, conn)
		if whole {
			conn.SetReadDeadline(time.Time{})
		} else {
			conn.SetReadDeadline(time.Now())
		}
	}
	return s.stopping.Load()
}

// takeSlot takes one of the DefaultMaxInflight slots (a probe first tries
// its own reserve) and returns its release. Event streams take none: the
// events actor bounds them. Once a stop has begun nothing new starts.
func (s *Server) takeSlot(r *http.Request) (release func(), err error) {
	if s.stopping.Load() {
		return nil, errStopping
	}
	if r.URL.Path == eventsPath {
		return func() {}, nil
	}
	if probe(r) {
		select {
		case s.probes <- struct{}{}:
			return func() { <-s.probes }, nil
		default:
		}
	}
	select {
	case s.inflight <- struct{}{}:
		return func() { <-s.inflight }, nil
	default:
		return nil, errBusy
	}
}

// probe reports whether r is one of the cheap reads that must answer
// however busy the daemon is: what `daemon status`, `daemon down`, `daemon
// up` and a metrics scraper ask. None reads a body.
func probe(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/v1/health", "/v1/version", "/v1/metrics":
		return true
	}
	return false
}

// trackConn keeps the set of connections that have not sent a whole
// request yet (net/http's StateNew), for a stop to close; one that arrives
// during a stop is closed at once.
func (s *Server) trackConn(c net.Conn, state http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if state != http.StateNew {
		delete(s.fresh, c)
		return
	}
	if s.stopping.Load() {
		c.Close()
		return
	}
	s.fresh[c] = struct{}{}
}

// stop runs when Shutdown begins (the listeners are closed): it ends every
// body still arriving (its request is answered 503 daemon_stopping) and
// closes the connections that have not sent a request, which Shutdown
// would otherwise wait for.
func (s *Server) stop() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.stopping.Store(true)
	now := time.Now()
	for c := range s.reading {
		c.SetReadDeadline(now)
	}
	for c := range s.fresh {
		c.Close()
	}
	clear(s.fresh)
}

// authorized checks the bearer token — the current one, or the one before
// it during its grace — compared in constant time; the scheme name is
// case-insensitive (RFC 7235).
func (s *Server) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	t := s.tokens.Load()
	return subtle.ConstantTimeCompare([]byte(tok), t.current) == 1 ||
		(t.previous != nil && s.opts.now().Before(t.previousUntil) && subtle.ConstantTimeCompare([]byte(tok), t.previous) == 1)
}

func (s *Server) publicHealth(r *http.Request) bool {
	return s.opts.PublicHealth && r.Method == http.MethodGet && r.URL.Path == "/v1/health"
}

// loopbackHost accepts an empty Host, localhost, 127.0.0.1 and [::1], with
// or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch strings.ToLower(host) {
	case "", "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}
