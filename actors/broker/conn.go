package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
	"github.com/claudemesh/claudemesh-go/transport/wsserver"
)

// Protocol timings.
const (
	MaxClockSkew   = 60 * time.Second
	MaxAttestation = 24 * time.Hour
	DeliveryLease  = 30 * time.Second
	// AckDelay is how long a client_ack may wait for others to share its
	// transaction (it answers no one).
	AckDelay   = 10 * time.Millisecond
	drainBatch = 256
	askTimeout = 30 * time.Second
)

// deps are what every connection shares.
type deps struct {
	store   *broker.Store
	limiter ratelimit.Limiter
	hub     *actor.PID
	accepts *actor.PID
	acks    *actor.PID
	sweeper *actor.PID
	log     *slog.Logger
	now     func() time.Time
	metrics *metrics
	lease   time.Duration   // how long a push waits for its client_ack
	legacy  *LegacyProtocol // nil: this broker's own protocol
	replica string          // this broker (named at Start) in the store's notifications and node rows
	// staleAfter is how long a node may go unheard before it is listed
	// stale (conn_nodes.go), and a session before it stops counting at
	// other replicas (conn_sessions.go).
	staleAfter time.Duration
	// grace is how long a dropped presence still counts: in the hub, and
	// in the row of a session closed here (conn_sessions.go).
	grace time.Duration
	// reservationStale is how long a reservation's holder may go without a
	// renewal before another may force it released.
	reservationStale time.Duration
	// live counts the connections' actors running (Broker.Close waits).
	live sync.WaitGroup
}

// Connection messages; revokedNow says the member was revoked while
// connected.
type (
	frameIn    struct{ data []byte }
	connClosed struct{ err error }
	revokedNow struct{}
)

// session feeds a WebSocket's events to its conn actor.
type session struct {
	root *actor.RootContext
	pid  *actor.PID
}

func (s *session) Frame(data []byte) { s.root.Send(s.pid, &frameIn{data: data}) }
func (s *session) Closed(err error)  { s.root.Send(s.pid, &connClosed{err: err}) }

// conn is one WebSocket connection: unauthenticated until a hello is
// accepted, then a member (or session) of one mesh.
type conn struct {
	*deps
	id     string
	link   *wsserver.Conn
	mesh   *broker.Mesh
	member *broker.Member
	// sender is the key the broker stamps as senderPubkey on this
	// connection's sends: the session key, else the member key.
	sender string
	// keys are the pubkeys this connection receives for: the member key,
	// a session_hello's session key only, a legacy hello's both.
	keys []string
	// session is set for a session_hello connection, a peer of its own:
	// its status and summary live in its hub presence, not in the
	// member's profile. status and name are its own ("": the member's).
	session      bool
	status, name string
	// directory is set when the client asked for member_directory in its
	// feature negotiation: its peer lists carry the members not connected.
	directory bool
	// node is set for a daemon's member connection, whose heartbeats keep
	// its node row (conn_nodes.go).
	node *broker.NodeConn
	// sessionRow is set for a session_hello connection on PostgreSQL,
	// which keeps its session's row (conn_sessions.go).
	sessionRow *broker.SessionConn
}

// statusNow is the status that decides what is pushed to this connection:
// a session's own, else its member's.
func (c *conn) statusNow() string { return cmp.Or(c.status, c.member.Status) }

// displayName is the name this connection's sends carry.
func (c *conn) displayName() string { return cmp.Or(c.name, c.member.DisplayName) }

func (c *conn) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Restarting:
	case *actor.Stopped:
		c.live.Done()
	case *frameIn:
		if !c.legacyConcurrent(ctx, m.data) {
			c.frame(ctx, m.data)
		}
	case *frameDelayed: // legacy.go
		c.frame(ctx, m.data)
	case *connClosed:
		c.closed(ctx, m.err)
	case *drain:
		c.drain(ctx)
	case *admitted:
		c.admitted(ctx, m.p)
	case *revokedNow:
		c.reject("revoked", "this member was revoked")
	case *heartbeat:
		c.heartbeat(ctx)
	default:
		c.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

// frame answers one client frame: a frame that does not decode with the
// decoder's error; before the hello, a hello or session_hello (anything
// else: no_hello); after it, the handler clientFrames has for the frame's
// type (none: already_authenticated).
func (c *conn) frame(ctx actor.Context, data []byte) {
	v, err := messages.DecodeClientFrame(data)
	if err != nil {
		var fe *messages.FrameError
		errors.As(err, &fe)
		c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: fe.Code, Message: fe.Message})
		return
	}
	if c.member == nil {
		switch f := v.(type) {
		case *messages.HelloFrame:
			c.hello(ctx, f)
		case *messages.SessionHelloFrame:
			c.sessionHello(ctx, f)
		default:
			c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: "no_hello", Message: "must send hello first"})
		}
		return
	}
	handle := clientFrames[reflect.TypeOf(v)] // conn_frames.go
	if handle == nil {
		c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: "already_authenticated", Message: "hello was already accepted"})
		return
	}
	handle(c, ctx, v)
}

// sendFrame encodes v and sends it; it returns the frame, nil when v did
// not encode (logged).
func (c *conn) sendFrame(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		c.log.Error("encode frame", "type", fmt.Sprintf("%T", v), "err", err)
		return nil
	}
	c.link.Send(data)
	return data
}

// reject answers a failed hello with an error frame and closes the
// connection: 1008 with the code as reason, or 4002 "banned" for a revoked
// member.
func (c *conn) reject(code, message string) {
	c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: code, Message: message})
	if code == "revoked" {
		c.link.Close(4002, "banned")
		return
	}
	c.link.Close(1008, code)
}

func (c *conn) hello(ctx actor.Context, f *messages.HelloFrame) {
	if f.SessionPubkey != "" && !isLowerHex64(f.SessionPubkey) {
		c.reject("bad_session_pubkey", "sessionPubkey must be 64 lowercase hex")
		return
	}
	if code, msg := c.checkSignature(f.Timestamp, meshcrypto.VerifyHello(f.Pubkey, f.MeshID, f.MemberID, f.Timestamp, f.Signature)); code != "" {
		c.reject(code, msg)
		return
	}
	mesh, member, code, msg := c.lookupMember(f.MeshID, strings.ToLower(f.Pubkey))
	if code != "" {
		c.reject(code, msg)
		return
	}
	if member.ID != f.MemberID {
		c.reject("member_id_mismatch", "memberId is not the id of the member holding this key")
		return
	}
	if !c.firstUse(member.Pubkey, f.Signature, f.Timestamp) {
		return
	}
	c.sender, c.keys = member.Pubkey, []string{member.Pubkey}
	if f.SessionPubkey != "" {
		c.sender, c.keys = f.SessionPubkey, []string{f.SessionPubkey, member.Pubkey}
	}
	p := &presence{sessionPubkey: f.SessionPubkey, sessionID: f.SessionID, groups: f.Groups,
		hostname: f.Hostname, peerType: f.PeerType, channel: f.Channel, cwd: f.Cwd}
	if c.legacy != nil { // upstream names the presence as its hello does
		c.name, p.ownName = f.DisplayName, f.DisplayName
	}
	if isNode(f) {
		c.node = &broker.NodeConn{Host: f.Hostname, Version: f.DaemonVersion}
	}
	c.recordLegacySession(f, member)
	c.admit(ctx, mesh, member, p)
}

func (c *conn) sessionHello(ctx actor.Context, f *messages.SessionHelloFrame) {
	a := f.ParentAttestation
	switch {
	case !isLowerHex64(f.SessionPubkey):
		c.reject("bad_session_pubkey", "sessionPubkey must be 64 lowercase hex")
		return
	case !isLowerHex64(f.ParentMemberPubkey):
		c.reject("bad_parent_pubkey", "parentMemberPubkey must be 64 lowercase hex")
		return
	case a.SessionPubkey != f.SessionPubkey || a.ParentMemberPubkey != f.ParentMemberPubkey:
		c.reject("attestation_mismatch", "the attestation names other keys")
		return
	}
	now := c.now().UnixMilli()
	switch {
	case a.ExpiresAt <= now:
		c.reject("expired", "the attestation has expired")
		return
	case a.ExpiresAt > now+MaxAttestation.Milliseconds():
		c.reject("ttl_too_long", "an attestation may last at most 24h")
		return
	}
	if err := meshcrypto.VerifySessionAttestation(f.ParentMemberPubkey, f.SessionPubkey, a.ExpiresAt, a.Signature); err != nil {
		c.reject(signatureCode(err), "attestation: "+err.Error())
		return
	}
	if code, msg := c.checkSignature(f.Timestamp, meshcrypto.VerifySessionHello(f.SessionPubkey, f.MeshID, f.ParentMemberPubkey, f.Timestamp, f.Signature)); code != "" {
		c.reject(code, msg)
		return
	}
	mesh, member, code, msg := c.lookupMember(f.MeshID, f.ParentMemberPubkey)
	if code != "" {
		c.reject(code, msg)
		return
	}
	if f.ParentMemberID != "" && f.ParentMemberID != member.ID {
		c.reject("parent_member_id_mismatch", "parentMemberId is not the id of the parent member")
		return
	}
	if f.DisplayName != "" && !messages.ValidDisplayName(f.DisplayName) {
		c.reject("bad_display_name", "a session's display name is UTF-8 with something visible and no control, format, bidi or zero-width characters")
		return
	}
	if !c.sessionNameFree(mesh.ID, member, f.DisplayName) || !c.firstUse(f.SessionPubkey, f.Signature, f.Timestamp) {
		return
	}
	// A session is a recipient of its own: rows addressed to the member
	// key are the member connection's to claim.
	c.sender, c.keys, c.session, c.name = f.SessionPubkey, []string{f.SessionPubkey}, true, f.DisplayName
	c.recordSession(f)
	c.admit(ctx, mesh, member, &presence{sessionPubkey: f.SessionPubkey, sessionID: f.SessionID, groups: f.Groups,
		hostname: f.Hostname, peerType: f.PeerType, channel: f.Channel, cwd: f.Cwd, sessionHello: true, ownName: f.DisplayName})
}

// checkSignature applies the clock-skew rule and maps a verification error
// to the hello error codes.
func (c *conn) checkSignature(timestampMs int64, verr error) (code, message string) {
	skew := c.now().Sub(time.UnixMilli(timestampMs))
	if skew > MaxClockSkew || skew < -MaxClockSkew {
		return "timestamp_skew", fmt.Sprintf("timestamp is %s off the broker's clock (±%s allowed)", skew.Round(time.Second), MaxClockSkew)
	}
	if verr != nil {
		return signatureCode(verr), verr.Error()
	}
	return "", ""
}

func signatureCode(err error) string {
	if errors.Is(err, meshcrypto.ErrBadSignature) {
		return "bad_signature"
	}
	return "malformed"
}

func (c *conn) lookupMember(meshID, pubkey string) (*broker.Mesh, *broker.Member, string, string) {
	ctx := context.Background()
	mesh, err := c.store.MeshByID(ctx, meshID)
	if err != nil {
		return nil, nil, "unauthorized", "no such mesh"
	}
	member, err := c.store.MemberByPubkey(ctx, mesh.ID, pubkey)
	switch {
	case err != nil:
		return nil, nil, "unauthorized", "this key is not a member of the mesh"
	case member.Revoked():
		return nil, nil, "revoked", "this member was revoked"
	}
	return mesh, member, "", ""
}

// admit registers the authenticated connection, acknowledges the hello and
// drains what was queued for it. Leases its keys still hold are freed
// first: they belong to pushes to a connection of theirs that is gone — a
// daemon reconnecting after a crash, or one whose broker (a replica on
// PostgreSQL, whose leases outlive it) died before its close could free
// them — so the drain takes those rows now rather than when the lease runs
// out. First means before the hub knows this connection: nothing can have
// been pushed to it yet, so no lease of its own is freed; and after the
// client acks batched so far are written, so that a row the gone
// connection acknowledged is not pushed again. A push in flight to another
// live connection of the same key is repeated, and the receiver dedupes
// it.
func (c *conn) admit(ctx actor.Context, mesh *broker.Mesh, member *broker.Member, p *presence) {
	c.mesh, c.member = mesh, member
	// The client acks batched before this (a connection of the same key
	// that is going) run first: their rows are delivered, not released.
	ctx.Send(c.acks, &flushThen{to: ctx.Self(), msg: &admitted{p: p}})
}

// admitted is admit's second step, once the client acks batched before it
// have been written.
type admitted struct{ p *presence }

func (c *conn) admitted(ctx actor.Context, p *presence) {
	if n, err := c.store.ReleaseRecipientLeases(context.Background(), c.mesh.ID, c.keys); err != nil {
		c.log.Warn("release the leases of a connecting member", "conn", c.id, "err", err) // they run out instead
	} else {
		c.metrics.leasesReleased.Add(float64(n))
	}
	p.connID, p.pid, p.link, p.meshID, p.member, p.connectedAt, p.keys = c.id, ctx.Self(), c.link, c.mesh.ID, c.member, c.now(), c.keys
	ctx.Send(c.hub, &hubRegister{p: p})
	c.connectNode()    // conn_nodes.go
	c.connectSession() // conn_sessions.go: before the ack, so that a DM after it is accepted at any replica
	c.link.Authenticated()
	c.sendFrame(&messages.HelloAckFrame{Type: messages.TypeHelloAck, PresenceID: c.id, MemberDisplayName: c.member.DisplayName})
	ctx.Send(ctx.Self(), &drain{})
}

func (c *conn) closed(ctx actor.Context, err error) {
	c.metrics.connections.Dec()
	if c.member != nil {
		ctx.Send(c.hub, &hubUnregister{connID: c.id})
		// The leases go after the unregister (the hub then skips this
		// connection) and after the acks it sent (those rows are delivered,
		// not released).
		ctx.Send(c.acks, &flushThen{to: c.sweeper, msg: &releaseLeases{meshID: c.mesh.ID, keys: c.keys}})
		c.disconnectNode()
		c.disconnectSession()
	}
	c.log.Debug("connection closed", "conn", c.id, "err", err)
	ctx.Stop(ctx.Self())
}

func isLowerHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
