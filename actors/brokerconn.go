package actors

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// MeshConfig is one joined mesh as its subtree needs it.
type MeshConfig struct {
	Slug     string
	MeshID   string
	MemberID string
	Identity *meshcrypto.Identity
	Name     string
	URL      string // the broker's WebSocket URL
	// Dial, when set, makes the connection under the WebSocket instead of
	// a TCP dial of URL's host (the embedded broker's pipes).
	Dial   DialFunc
	Legacy bool // --legacy-broker
	// Liveness is how long a silent broker connection is kept (0: the
	// protocol's 75 s); pings go out at 2/5 of it.
	Liveness time.Duration
	// AckTimeout is how long a send waits for the broker's ack before it
	// counts as a transient failure (0: AckTimeout).
	AckTimeout time.Duration
	// Features, when set, is told what the connection negotiated (and
	// that it has none while it is down), for GET /v1/version.
	Features *messages.BrokerFeatures
	// Version is the daemon's, sent in the member hello for the broker's
	// list of the mesh's nodes.
	Version string
	// Session, when set, makes this subtree an agent session's: Identity
	// is the session key, the connection opens with a session_hello the
	// member key vouches for, and Name is the session's display name.
	Session *SessionConfig

	pace *paceBoard // the dispatcher's pacing, for the connection's status (set by meshProps)
}

// DialFunc connects to a broker's address (a websocket.Dialer's
// NetDialContext).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// SessionConfig is what a session's connection says about it.
type SessionConfig struct {
	Parent    *meshcrypto.Identity // the member key that attests the session key
	SessionID string
	PID       int
	Cwd       string
	Groups    []string
}

// BrokerConn owns one mesh's WebSocket to its broker: it dials (with the
// jittered backoff and the circuit breaker of wsclient), hands the
// broker's pushes to the inbox and send acks to the dispatcher, reports
// the link's state, and carries every other feature through its relays
// (brokerconn_relays.go): the messages and frames it does not take itself
// it looks up in their table. A failed feature negotiation is final: it
// reports on fatal instead of retrying.
type BrokerConn struct {
	cfg        MeshConfig
	store      *actor.PID // for the connection's events
	dispatcher *actor.PID
	inbox      *actor.PID
	metrics    *metrics.Daemon
	log        *slog.Logger
	fatal      chan<- error
	relays     *relayTable

	conn    *wsclient.Conn
	session *wsclient.Session
	backoff *wsclient.Backoff
	breaker *wsclient.Breaker
	closing bool
	downAt  time.Time // when the connection was lost; zero before the first
	downBy  int       // the close code it was lost with
	// revoked says the broker refused the member key as revoked (reported
	// once until a hello succeeds again).
	revoked bool
	// refused is a session's hello the broker refused for good (its name
	// is another member's): the connection stops dialling.
	refused error
	// awaiting are the askers of *AwaitLink until the first dial's end.
	awaiting []*actor.PID
	dialled  bool // a dial has ended, connected or not
}

// Broker connection messages.
type (
	dialed struct {
		conn    *wsclient.Conn
		session *wsclient.Session
		err     error
	}
	redial      struct{}
	brokerFrame struct {
		conn  *wsclient.Conn
		frame any
	}
	linkEnded struct {
		conn *wsclient.Conn
		err  error
	}
	// linkUp / linkDown tell the dispatcher the connection's state; it
	// writes its sends to the connection itself.
	linkUp struct {
		conn      *wsclient.Conn
		maxAge    time.Duration
		firstSend bool // the broker takes first_send (wsclient.Session.FirstSend)
		// serial: one send in flight at a time. A legacy broker negotiated
		// nothing, and upstream's handles a connection's frames
		// concurrently: two sends in flight could be stored, acked and
		// pushed in the other order. Ours keeps one connection's order.
		serial bool
	}
	linkDown struct{}
	// inboundPush is a push for the inbox, with the connection it came on
	// (the inbox acks it there).
	inboundPush struct {
		push *messages.PushFrame
		conn *wsclient.Conn
	}
)

// ErrNotConnected means the mesh has no broker connection right now.
var ErrNotConnected = errors.New("broker not connected")

func newBrokerConn(cfg MeshConfig, store, dispatcher, inbox *actor.PID, m *metrics.Daemon, log *slog.Logger, fatal chan<- error) actor.Producer {
	return func() actor.Actor {
		b := &BrokerConn{cfg: cfg, store: store, dispatcher: dispatcher, inbox: inbox, metrics: m, log: log.With("actor", "broker"),
			fatal: fatal, backoff: wsclient.NewBackoff(rand.Float64), breaker: wsclient.NewBreaker(time.Now)}
		b.relays = newRelayTable(b.relayList())
		return b
	}
}

// AwaitLink asks a connection for the end of its first dial; the reply is
// *LinkAwaited. Registering a session waits for it, so that a name the
// broker refuses is refused to the caller instead of retried.
type AwaitLink struct{}

// LinkAwaited says how a connection's first dial ended: Err is the
// refusal of a session's hello that the connection will not retry (409
// display_name_taken); nil when it connected or will retry.
type LinkAwaited struct{ Err error }

// endHolds asks a session's connection to release what it holds as the
// session ends (Tree.Detach asks it before the subtree stops); the reply
// is *endedHolds, once the releases are queued before the connection's
// close.
type (
	endHolds   struct{}
	endedHolds struct{}
)

func (b *BrokerConn) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		b.dial(ctx)
		b.relays.each(ctx, atStart)
	case *actor.Stopping, *actor.Restarting:
		b.closing = true
		if b.conn != nil {
			b.conn.Close(1000, "daemon stopping")
		}
	case *actor.Stopped:
	case *redial:
		b.dial(ctx)
	case *dialed:
		b.connected(ctx, m)
	case *brokerFrame:
		if m.conn == b.conn {
			b.frame(ctx, m.frame)
		}
	case *linkEnded:
		b.ended(ctx, m)
	case *messages.MeshStatus:
		ctx.Respond(b.status())
	case *AwaitLink:
		if b.dialled {
			ctx.Respond(&LinkAwaited{Err: b.refused})
		} else {
			b.awaiting = append(b.awaiting, ctx.Sender())
		}
	case *endHolds:
		b.relays.each(ctx, atEnd)
		ctx.Respond(&endedHolds{})
	case *messages.EventAppended:
		if m.Err != nil {
			b.log.Warn("append event", "err", m.Err)
		}
	default:
		if take := b.relays.messages[reflect.TypeOf(m)]; take != nil {
			take(ctx, m)
		} else {
			b.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
		}
	}
}

// dial connects in a goroutine; the result comes back as *dialed.
func (b *BrokerConn) dial(ctx actor.Context) {
	if !b.breaker.Allow() {
		workers.SendLater(ctx, b.breaker.RetryIn(), &redial{})
		return
	}
	cfg := wsclient.Config{URL: b.cfg.URL, MeshID: b.cfg.MeshID, MemberID: b.cfg.MemberID, Identity: b.cfg.Identity,
		DisplayName: b.cfg.Name, Legacy: b.cfg.Legacy, Log: b.log, ReadTimeout: b.cfg.Liveness, PingInterval: b.cfg.Liveness * 2 / 5,
		DaemonVersion: b.cfg.Version}
	if s := b.cfg.Session; s != nil {
		cfg.Parent, cfg.SessionID, cfg.PID, cfg.Cwd, cfg.Groups = s.Parent, s.SessionID, s.PID, s.Cwd, s.Groups
	}
	if b.cfg.Dial != nil {
		cfg.Dialer = &websocket.Dialer{NetDialContext: b.cfg.Dial, HandshakeTimeout: wsclient.DefaultHelloTimeout}
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	go func() {
		dctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		conn, session, err := wsclient.Dial(dctx, cfg)
		root.Send(self, &dialed{conn: conn, session: session, err: err})
	}()
}

func (b *BrokerConn) connected(ctx actor.Context, m *dialed) {
	defer b.dialEnded(ctx)
	var neg *wsclient.NegotiationError
	switch {
	case errors.As(m.err, &neg):
		b.log.Error("feature_negotiation_failed", "err", m.err)
		b.event(ctx, "feature_negotiation_failed", neg.Reason)
		select {
		case b.fatal <- fmt.Errorf("mesh %s: %w", b.cfg.Slug, m.err):
		default:
		}
		return
	case m.err != nil:
		var hello *wsclient.HelloError
		if errors.As(m.err, &hello) && hello.Code == messages.CodeDisplayNameTaken && b.cfg.Session != nil {
			b.refused = &messages.Error{Status: http.StatusConflict, Code: messages.CodeDisplayNameTaken,
				Detail: fmt.Sprintf("the broker of mesh %s refused the session's name: %s", b.cfg.Slug, hello.Message)}
			b.log.Error("session_name_refused", "detail", hello.Message)
			return
		}
		if errors.As(m.err, &hello) && hello.Code == "revoked" && !b.revoked {
			b.revoked = true
			b.cfg.Features.SetRevoked(b.cfg.Slug, true)
			b.log.Error("member_revoked", "mesh", b.cfg.Slug, "detail", "the mesh's owner revoked this daemon's key; "+
				"sends to this mesh wait until their max age. Join again with a new invite (claudemesh join) for a new key")
			b.event(ctx, "member_revoked", map[string]any{"mesh": b.cfg.Slug})
		}
		b.breaker.Failure()
		wait := b.backoff.Next()
		b.log.Warn("broker_connect_failed", "err", m.err, "retry_in", wait.Round(time.Millisecond).String(), // 533ms, not ns
			"breaker", b.breaker.State())
		workers.SendLater(ctx, wait, &redial{})
		return
	}
	if b.closing {
		m.conn.Close(1000, "daemon stopping")
		return
	}
	b.breaker.Success()
	b.backoff.Reset()
	b.revoked = false
	b.conn, b.session = m.conn, m.session
	if m.session.Legacy {
		b.log.Warn("legacy_broker", "detail", "the broker does not deduplicate; idempotency holds at the daemon only")
	}
	b.log.Info("broker_connected", "features", m.session.Features, "max_age", m.session.MaxAge().String())
	b.cfg.Features.Set(b.cfg.Slug, m.session.Negotiated())
	b.cfg.Features.SetRevoked(b.cfg.Slug, false)
	b.event(ctx, "broker_status", map[string]any{"mesh": b.cfg.Slug, "connected": true, "features": m.session.Features})
	if !b.downAt.IsZero() {
		b.metrics.Reconnects.WithLabelValues(b.cfg.Slug, strconv.Itoa(b.downBy)).Inc()
		b.event(ctx, "daemon_reconnect", map[string]any{"mesh": b.cfg.Slug, "attempt": b.backoff.Attempt(),
			"downtime_ms": time.Since(b.downAt).Milliseconds()})
	}
	// The reader hands pushes to the inbox and send acks to the dispatcher
	// itself, one hop shorter; the rest goes through this actor.
	root, self, conn, inbox, dispatcher := ctx.ActorSystem().Root, ctx.Self(), m.conn, b.inbox, b.dispatcher
	go func() {
		for f := range conn.Frames() {
			switch f := f.(type) {
			case *messages.PushFrame:
				root.Send(inbox, &inboundPush{push: f, conn: conn})
			case *messages.AckFrame:
				if f.ReqID == nil {
					root.Send(dispatcher, f)
				} else { // a relay's request's (memory's forget)
					root.Send(self, &brokerFrame{conn: conn, frame: f})
				}
			default:
				root.Send(self, &brokerFrame{conn: conn, frame: f})
			}
		}
		<-conn.Done()
		root.Send(self, &linkEnded{conn: conn, err: conn.Err()})
	}()
	ctx.Send(b.dispatcher, &linkUp{conn: conn, maxAge: m.session.MaxAge(), firstSend: m.session.FirstSend, serial: m.session.Legacy})
	b.relays.each(ctx, atUp)
}

func (b *BrokerConn) ended(ctx actor.Context, m *linkEnded) {
	if m.conn != b.conn {
		return
	}
	b.conn, b.session = nil, nil
	ctx.Send(b.dispatcher, &linkDown{})
	code, reason := 1006, fmt.Sprint(m.err)
	var ce *wsclient.CloseError
	if errors.As(m.err, &ce) {
		code, reason = ce.Code, ce.Reason
	}
	b.downAt, b.downBy = time.Now(), code
	b.cfg.Features.Set(b.cfg.Slug, nil)
	b.event(ctx, "daemon_disconnect", map[string]any{"mesh": b.cfg.Slug, "code": code, "reason": reason})
	b.relays.each(ctx, atDown)
	if b.closing {
		return
	}
	wait := b.backoff.Next()
	b.log.Warn("broker_disconnected", "err", m.err, "retry_in", wait.Round(time.Millisecond).String())
	workers.SendLater(ctx, wait, &redial{})
}

// frame hands a broker frame to the relay that takes it: an error frame
// or an ack to the one whose request it names, any other by its type. A
// frame of a type nothing takes (upstream's peer_joined, say) is dropped.
func (b *BrokerConn) frame(ctx actor.Context, f any) {
	switch f := f.(type) {
	case *messages.ErrorFrame:
		if !b.relays.refused(ctx, cmp.Or(f.ReqID, f.ID), f) {
			b.log.Warn("broker_error_frame", "code", f.Code, "message", f.Message)
		}
	case *messages.AckFrame: // the reader hands a send's ack, with no _reqId, to the dispatcher
		if f.ReqID != nil {
			b.relays.acked(ctx, *f.ReqID, f)
		}
	default:
		if take := b.relays.frames[reflect.TypeOf(f)]; take != nil {
			take(ctx, f)
		}
	}
}

// dialEnded answers the askers of *AwaitLink once the first dial ends.
func (b *BrokerConn) dialEnded(ctx actor.Context) {
	b.dialled = true
	for _, who := range b.awaiting {
		ctx.Send(who, &LinkAwaited{Err: b.refused})
	}
	b.awaiting = nil
}

// event persists and publishes an event about the connection (the store
// publishes it after the commit).
func (b *BrokerConn) event(ctx actor.Context, name string, data any) {
	payload, err := json.Marshal(data)
	if err != nil {
		return
	}
	ctx.Request(b.store, &messages.AppendEvent{Name: name, Data: payload})
}

// send writes a relay's frame to the link.
func (b *BrokerConn) send(frame any) error {
	switch {
	case b.conn == nil && b.revoked:
		return b.revokedError()
	case b.conn == nil:
		return ErrNotConnected
	}
	return b.conn.Send(frame)
}

func (b *BrokerConn) status() *messages.MeshStatusReply {
	r := &messages.MeshStatusReply{Connected: b.conn != nil, Breaker: b.breaker.State(), Revoked: b.revoked,
		Pace: b.cfg.pace.get(time.Now())}
	if b.conn != nil {
		r.LagMs = b.conn.RTT().Milliseconds()
		r.Features = b.session.Features
	}
	return r
}

// revokedError is the 403 of a request the broker refused because the
// mesh's owner revoked this member's key.
func (b *BrokerConn) revokedError() *messages.Error {
	return &messages.Error{Status: http.StatusForbidden, Code: messages.CodeMemberRevoked,
		Detail: fmt.Sprintf("the broker of mesh %s refused this member's key as revoked: ask the mesh's operator for a new invite", b.cfg.Slug)}
}

// lacks reports whether the connected broker did not advertise ability
// (upstream's, or an older one): a request of it is not sent. While the
// link is down nothing is known, and the request fails as unsent.
func (b *BrokerConn) lacks(ability string) bool {
	return b.session != nil && !slices.Contains(b.session.Abilities, ability)
}

// brokerRefused is the 502 of a refusal a relay has no answer of its own
// for.
func (b *BrokerConn) brokerRefused(f *messages.ErrorFrame) *messages.Error {
	return &messages.Error{Status: http.StatusBadGateway, Code: "broker_refused",
		Detail: fmt.Sprintf("the broker of mesh %s answered %s: %s", b.cfg.Slug, f.Code, f.Message)}
}

// refusedInput is the 400 of a request the broker refused as invalid, under
// the daemon's code for it.
func refusedInput(code string, f *messages.ErrorFrame) *messages.Error {
	return &messages.Error{Status: http.StatusBadRequest, Code: code, Detail: "the broker refused it: " + f.Message}
}

// clientAckFrame is what the inbox sends back for every stored push.
func clientAckFrame(p *messages.PushFrame) *messages.ClientAckFrame {
	return &messages.ClientAckFrame{Type: messages.TypeClientAck, ClientMessageID: p.ClientMessageID, BrokerMessageID: p.MessageID}
}
