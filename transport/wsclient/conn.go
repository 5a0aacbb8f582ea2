// Package wsclient is the daemon's WebSocket connection to one mesh's
// broker (wire protocol §1, spec §15): dial, signed hello, feature
// negotiation, then a Conn whose reader and writer goroutines deliver
// decoded broker frames on a channel, queue outgoing frames, ping and
// enforce liveness. Reconnecting is the caller's job, paced by Backoff and
// Breaker.
package wsclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/fifo"
	"github.com/claudemesh/claudemesh-go/transport/cork"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// Defaults (wire protocol §1.7–1.8).
const (
	DefaultPingInterval     = 30 * time.Second
	DefaultReadTimeout      = 75 * time.Second
	DefaultHelloTimeout     = 5 * time.Second
	DefaultNegotiateTimeout = 5 * time.Second
	DefaultSendQueue        = 1024
	DefaultFrameBuffer      = 1024
	writeTimeout            = 10 * time.Second
	closeWait               = time.Second
	// maxFrameBytes bounds one incoming frame.
	maxFrameBytes = 16 << 20
)

// Config configures Dial.
type Config struct {
	// URL is the broker's WebSocket URL; its path must end in /ws and it
	// must have no query string.
	URL         string
	MeshID      string
	MemberID    string
	Identity    *meshcrypto.Identity // member key: signs the hello
	DisplayName string
	// Parent, when set, makes this a session connection: Identity is the
	// session's key and the first frame is a session_hello whose
	// attestation Parent (the member key) signs afresh at every dial, so
	// that a session outlives any one attestation.
	Parent *meshcrypto.Identity
	PID    int      // the peer's process (0: this one)
	Groups []string // "@name[:role]" (a session's groups)
	// Legacy skips the feature negotiation (--legacy-broker): any broker
	// that accepts the hello is used. The caller logs the loud warning.
	Legacy bool

	// SessionID defaults to "daemon-<pid>"; Cwd to the working directory;
	// Hostname to os.Hostname; a member hello's Channel to
	// messages.ChannelDaemon (our CLI's own connections say
	// messages.ChannelCLI: they are not nodes of the mesh).
	SessionID string
	Cwd       string
	Hostname  string
	Channel   string
	// DaemonVersion, set by the daemon, is sent in the member hello, for
	// the broker's list of the mesh's nodes.
	DaemonVersion string

	PingInterval     time.Duration // 0: 30 s
	ReadTimeout      time.Duration // liveness: nothing received for this long ends the Conn; 0: 75 s
	HelloTimeout     time.Duration // wait for hello_ack; 0: 5 s
	NegotiateTimeout time.Duration // wait for feature_negotiation_response; 0: 5 s
	SendQueue        int           // 0: 1024 frames
	FrameBuffer      int           // capacity of Frames(); 0: 1024

	Dialer *websocket.Dialer // nil: a dialer with a HelloTimeout handshake timeout
	Now    func() time.Time  // hello timestamp clock; nil: time.Now
	Log    *slog.Logger      // nil: discard

	signWith *meshcrypto.Identity // tests: sign the hello with another key
}

func (c *Config) defaults() {
	if c.PingInterval <= 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.HelloTimeout <= 0 {
		c.HelloTimeout = DefaultHelloTimeout
	}
	if c.NegotiateTimeout <= 0 {
		c.NegotiateTimeout = DefaultNegotiateTimeout
	}
	if c.SendQueue <= 0 {
		c.SendQueue = DefaultSendQueue
	}
	if c.FrameBuffer <= 0 {
		c.FrameBuffer = DefaultFrameBuffer
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.SessionID == "" {
		c.SessionID = "daemon-" + strconv.Itoa(os.Getpid())
	}
	if c.Cwd == "" {
		c.Cwd, _ = os.Getwd()
	}
	if c.Hostname == "" {
		c.Hostname, _ = os.Hostname()
	}
	if c.Channel == "" {
		c.Channel = messages.ChannelDaemon
	}
}

// Errors.
var (
	// ErrClosed: Send on a Conn that has ended.
	ErrClosed = errors.New("wsclient: connection closed")
	// ErrQueueFull: Send found the outgoing queue full; the frame was not
	// queued (the connection stays up).
	ErrQueueFull = errors.New("wsclient: send queue full")
	// ErrLiveness: nothing (frame, ping or pong) was received for
	// Config.ReadTimeout.
	ErrLiveness = errors.New("wsclient: liveness timeout")
	// ErrHelloTimeout: no hello_ack within Config.HelloTimeout.
	ErrHelloTimeout = errors.New("wsclient: no hello_ack in time")
)

// CloseError is a connection ended by a close frame: from the broker, or
// (Local) by Conn.Close.
type CloseError struct {
	Code   int
	Reason string
	Local  bool
}

func (e *CloseError) Error() string {
	by := "broker"
	if e.Local {
		by = "client"
	}
	return fmt.Sprintf("wsclient: closed by %s with %d %q", by, e.Code, e.Reason)
}

// HelloError is a hello the broker rejected: its error frame's code
// (bad_signature, timestamp_skew, unauthorized, revoked, capacity, …) and
// the close that followed (1008 with the code as reason, 4002 "banned").
type HelloError struct {
	Code      string
	Message   string
	CloseCode int // 0 when no close frame was seen
	Close     string
}

func (e *HelloError) Error() string {
	return fmt.Sprintf("wsclient: broker rejected hello: %s: %s (close %d %q)", e.Code, e.Message, e.CloseCode, e.Close)
}

// Dial connects to the broker, authenticates with a signed hello and,
// unless cfg.Legacy, negotiates features. On success the Conn is running
// and any frames received during the handshake (pushes may precede
// hello_ack) are the first on Frames(). Errors: *HelloError,
// *NegotiationError (not transient), *CloseError, ErrHelloTimeout, ctx's
// error, or a dial/read error.
func Dial(ctx context.Context, cfg Config) (*Conn, *Session, error) {
	cfg.defaults()
	if cfg.Identity == nil {
		return nil, nil, errors.New("wsclient: Config.Identity is required")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("wsclient: broker URL: %w", err)
	}
	if (u.Scheme != "ws" && u.Scheme != "wss") || !strings.HasSuffix(u.Path, "/ws") || u.RawQuery != "" {
		return nil, nil, fmt.Errorf("wsclient: broker URL %q must be ws:// or wss:// with a path ending in /ws and no query", cfg.URL)
	}
	var dialer websocket.Dialer
	if cfg.Dialer != nil {
		dialer = *cfg.Dialer
	} else {
		dialer = websocket.Dialer{Proxy: websocket.DefaultDialer.Proxy, HandshakeTimeout: cfg.HelloTimeout}
	}
	if dialer.WriteBufferPool == nil {
		dialer.WriteBufferPool = writeBuffers
	}
	corking := &corkingDial{dial: dialer.NetDialContext}
	if netDial := dialer.NetDial; corking.dial == nil && netDial != nil {
		corking.dial = func(_ context.Context, network, addr string) (net.Conn, error) { return netDial(network, addr) }
	} else if corking.dial == nil {
		corking.dial = (&net.Dialer{}).DialContext
	}
	dialer.NetDialContext, dialer.NetDial = corking.dialContext, nil
	ws, _, err := dialer.DialContext(ctx, cfg.URL, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("wsclient: dial %s: %w", cfg.URL, err)
	}
	ws.SetReadLimit(maxFrameBytes)
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	h := &handshake{cfg: &cfg, ws: ws}
	sess, err := h.run()
	if !stop() || ctx.Err() != nil {
		ws.Close()
		return nil, nil, fmt.Errorf("wsclient: dial %s: %w", cfg.URL, context.Cause(ctx))
	}
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	ws.SetReadDeadline(time.Time{})
	return start(&cfg, ws, corking.conn, h.pending), sess, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// closeErr turns gorilla's close error into a *CloseError.
func closeErr(err error, local bool) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return &CloseError{Code: ce.Code, Reason: ce.Text, Local: local}
	}
	return err
}

// Conn is an authenticated connection. Its reader goroutine delivers
// decoded frames on Frames(); its writer goroutine sends queued frames and
// pings. It ends on the first read or write error, a close from either
// side, or a liveness timeout; then Done() is closed, Frames() is closed
// after the last frame, and Err() says why.
type Conn struct {
	cfg    *Config
	ws     *websocket.Conn
	cork   *cork.Conn // under ws (nil: the Dialer's NetDialTLSContext made the connection)
	out    *fifo.Queue[[]byte]
	frames chan any
	done   chan struct{}
	closeQ chan *CloseError

	endOnce   sync.Once
	closeOnce sync.Once
	closing   atomic.Pointer[CloseError] // set by Close
	mu        sync.Mutex
	err       error
	rtt       atomic.Int64
}

func start(cfg *Config, ws *websocket.Conn, cork *cork.Conn, pending []any) *Conn {
	c := &Conn{cfg: cfg, ws: ws, cork: cork, out: fifo.New[[]byte](cfg.SendQueue),
		frames: make(chan any, max(cfg.FrameBuffer, len(pending))), done: make(chan struct{}),
		closeQ: make(chan *CloseError, 1)}
	for _, f := range pending {
		c.frames <- f
	}
	alive := func() { ws.SetReadDeadline(time.Now().Add(cfg.ReadTimeout)) }
	alive()
	ws.SetPingHandler(func(data string) error {
		alive()
		err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeTimeout))
		if err == websocket.ErrCloseSent || isTimeout(err) {
			return nil
		}
		return err
	})
	ws.SetPongHandler(func(data string) error {
		alive()
		if sent, err := strconv.ParseInt(data, 10, 64); err == nil {
			if d := time.Since(time.Unix(0, sent)); d >= 0 {
				c.rtt.Store(int64(d))
			}
		}
		return nil
	})
	go c.read(alive)
	go c.write()
	return c
}

// Frames delivers decoded broker frames in arrival order: *messages.AckFrame,
// *messages.PushFrame, *messages.PeersListFrame, *messages.ErrorFrame,
// *UnknownFrame, …. It is closed when the Conn ends. Read it promptly: a
// reader blocked on a full channel stops reading the socket, and the
// liveness timeout then ends the Conn.
func (c *Conn) Frames() <-chan any { return c.frames }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection ended (nil while it runs): *CloseError (from
// the broker, or Local after Close), an error wrapping ErrLiveness, or a
// read/write error.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// RTT is the round trip of the last answered ping (0 before the first).
func (c *Conn) RTT() time.Duration { return time.Duration(c.rtt.Load()) }

// Send queues a frame for the writer without blocking. A []byte or
// json.RawMessage is sent as is (the outbox's stored payload); anything
// else is JSON-encoded. It fails with ErrClosed once the Conn has ended (or
// Close was called) and ErrQueueFull when the queue is full.
func (c *Conn) Send(frame any) error {
	var data []byte
	switch f := frame.(type) {
	case []byte:
		data = f
	case json.RawMessage:
		data = f
	default:
		var err error
		if data, err = json.Marshal(frame); err != nil {
			return fmt.Errorf("wsclient: encode %T: %w", frame, err)
		}
	}
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	if c.closing.Load() != nil {
		return ErrClosed
	}
	if !c.out.Push(data) {
		return ErrQueueFull
	}
	return nil
}

// Close sends a close frame with code and reason (cut to 123 bytes) ahead of
// any frames still queued, waits briefly for the broker's close, and ends
// the connection; Err() is then a Local *CloseError. It returns at once;
// wait on Done() if needed.
func (c *Conn) Close(code int, reason string) {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	c.closeOnce.Do(func() {
		ce := &CloseError{Code: code, Reason: reason, Local: true}
		c.closing.Store(ce)
		c.closeQ <- ce
	})
}

// end ends the connection once; the first reason wins, and a Close before
// it wins over the errors it causes.
func (c *Conn) end(err error) {
	if ce := c.closing.Load(); ce != nil {
		err = ce
	}
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
		c.ws.Close()
	})
}

func (c *Conn) read(alive func()) {
	defer close(c.frames)
	var buf bytes.Buffer // reused: a decoded frame keeps no reference to it
	for {
		data, err := c.nextMessage(&buf)
		if err != nil {
			if isTimeout(err) {
				err = fmt.Errorf("%w: nothing received for %s", ErrLiveness, c.cfg.ReadTimeout)
			} else {
				err = closeErr(err, false)
			}
			c.end(err)
			return
		}
		alive()
		f, err := DecodeBrokerFrame(data)
		if err != nil {
			c.cfg.Log.Warn("undecodable broker frame", "err", err)
			continue
		}
		select {
		case c.frames <- f:
		case <-c.done:
			return
		}
	}
}

// nextMessage reads the next message into buf.
func (c *Conn) nextMessage(buf *bytes.Buffer) ([]byte, error) {
	_, r, err := c.ws.NextReader()
	if err != nil {
		return nil, err
	}
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (c *Conn) write() {
	ping := time.NewTicker(c.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-c.done:
			return
		case ce := <-c.closeQ:
			// What was queued before the Close goes first (a session's lock
			// releases as it ends); a write that fails skips to the close.
			for data, ok := c.out.Pop(); ok && c.writeQueued(data) == nil; data, ok = c.out.Pop() {
			}
			c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(ce.Code, ce.Reason), time.Now().Add(writeTimeout))
			select { // the reader ends on the broker's echo
			case <-c.done:
			case <-time.After(closeWait):
				c.end(ce)
			}
			return
		case <-c.out.Ready():
			for data, ok := c.out.Pop(); ok; data, ok = c.out.Pop() {
				if err := c.writeQueued(data); err != nil {
					c.end(fmt.Errorf("wsclient: write: %w", err))
					return
				}
			}
		case <-ping.C:
			payload := strconv.FormatInt(time.Now().UnixNano(), 10)
			if err := c.ws.WriteControl(websocket.PingMessage, []byte(payload), time.Now().Add(writeTimeout)); err != nil {
				c.end(fmt.Errorf("wsclient: ping: %w", err))
				return
			}
		}
	}
}
