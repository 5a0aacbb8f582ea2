package wsclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	brokeractors "github.com/claudemesh/claudemesh-go/actors/broker"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// ourBroker is our real broker (SQLite store, actors, WebSockets over
// loopback) in the test process, with one mesh.
type ourBroker struct {
	t     *testing.T
	store *broker.Store
	mesh  *broker.Mesh
	url   string
}

func startBroker(t *testing.T, mesh broker.Mesh) *ourBroker {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := broker.Open(context.Background(), broker.Options{Dir: t.TempDir(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	b, err := brokeractors.Start(brokeractors.Options{Store: store,
		Limiter: ratelimit.NewMemory(ratelimit.Options{Limit: 1_000_000, Window: time.Minute}), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(func() { srv.Close(); b.Close(context.Background()) })
	if mesh.Slug == "" {
		mesh.Slug = "test"
	}
	m, err := store.CreateMesh(context.Background(), mesh)
	if err != nil {
		t.Fatal(err)
	}
	return &ourBroker{t: t, store: store, mesh: m, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"}
}

type member struct {
	id  *meshcrypto.Identity
	row *broker.Member
}

func (b *ourBroker) member(name string) *member {
	b.t.Helper()
	id, err := meshcrypto.GenerateIdentity()
	if err != nil {
		b.t.Fatal(err)
	}
	inv, err := b.store.CreateInvite(context.Background(), broker.InviteRequest{MeshSlug: b.mesh.Slug, BrokerURL: "ws://127.0.0.1/ws", Uses: 1, TTL: time.Hour})
	if err != nil {
		b.t.Fatal(err)
	}
	joined, err := b.store.RedeemInvite(context.Background(), inv.Token, id.PublicKeyHex(), name)
	if err != nil {
		b.t.Fatal(err)
	}
	return &member{id: id, row: joined.Member}
}

func (b *ourBroker) config(m *member) Config {
	return Config{URL: b.url, MeshID: b.mesh.ID, MemberID: m.row.ID, Identity: m.id, DisplayName: m.row.DisplayName,
		SessionID: "daemon-test-" + m.row.ID}
}

func dial(t *testing.T, cfg Config) (*Conn, *Session) {
	t.Helper()
	c, s, err := Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close(websocket.CloseNormalClosure, "test over") })
	return c, s
}

// next returns the next frame of type T from c, skipping others, failing
// after 5 s.
func next[T any](t *testing.T, c *Conn) T {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case f, ok := <-c.Frames():
			if !ok {
				t.Fatalf("connection ended waiting for %T: %v", *new(T), c.Err())
			}
			if v, ok := f.(T); ok {
				return v
			}
		case <-deadline:
			var zero T
			t.Fatalf("no %T within 5 s", zero)
			return zero
		}
	}
}

func waitDone(t *testing.T, c *Conn) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(5 * time.Second):
		t.Fatal("connection did not end within 5 s")
		return nil
	}
}

func sendFrame(id, to string) *messages.SendFrame {
	return &messages.SendFrame{Type: messages.TypeSend, ID: id, ClientMessageID: id,
		RequestFingerprint: strings.Repeat("ab", 32), TargetSpec: to, Priority: "now",
		Nonce: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", Ciphertext: "aGVsbG8="}
}

// TestDialOurBroker: hello and negotiation succeed against our broker; a DM
// sent with Send is acknowledged on Frames and pushed to the recipient.
func TestDialOurBroker(t *testing.T) {
	b := startBroker(t, broker.Mesh{})
	alice, bob := b.member("alice"), b.member("bob")
	cfgA := b.config(alice)
	cfgA.PingInterval = 20 * time.Millisecond
	ca, sa := dial(t, cfgA)
	if sa.Legacy || sa.DedupeMode != ModeRetentionScoped || sa.DedupeRetentionDays != 365 || sa.MaxAge() != 7884*time.Hour ||
		!sa.FirstSend {
		t.Fatalf("session = %+v, max age %s", sa, sa.MaxAge())
	}
	want := []string{FeatureDedupe, FeatureConcurrent, FeatureMaxPayload}
	if !slices.Equal(sa.Features, want) {
		t.Fatalf("features = %v, want %v", sa.Features, want)
	}
	if sa.MaxPayloadBytes != b.mesh.MaxPayloadBytes || sa.PresenceID == "" || sa.MemberDisplayName != "alice" {
		t.Fatalf("session = %+v (mesh max payload %d)", sa, b.mesh.MaxPayloadBytes)
	}
	cb, _ := dial(t, b.config(bob))

	if err := ca.Send(sendFrame("m-1", bob.id.PublicKeyHex())); err != nil {
		t.Fatal(err)
	}
	ack := next[*messages.AckFrame](t, ca)
	if ack.ID != "m-1" || ack.Error != "" || ack.MessageID == "" || ack.Code != 201 {
		t.Fatalf("ack = %+v", ack)
	}
	push := next[*messages.PushFrame](t, cb)
	for push.Subtype == "system" {
		push = next[*messages.PushFrame](t, cb)
	}
	if push.ClientMessageID != "m-1" || push.SenderPubkey != alice.id.PublicKeyHex() || push.Ciphertext != "aGVsbG8=" {
		t.Fatalf("push = %+v", push)
	}
	// Pre-encoded bytes (the outbox's stored payload) go out as they are:
	// the same id and fingerprint is a duplicate.
	raw, _ := json.Marshal(sendFrame("m-1", bob.id.PublicKeyHex()))
	if err := ca.Send(raw); err != nil {
		t.Fatal(err)
	}
	if dup := next[*messages.AckFrame](t, ca); dup.Code != 200 || !dup.Duplicate || dup.MessageID != ack.MessageID {
		t.Fatalf("duplicate ack = %+v", dup)
	}
	if err := cb.Send(&messages.ClientAckFrame{Type: messages.TypeClientAck, ClientMessageID: push.ClientMessageID,
		BrokerMessageID: push.MessageID}); err != nil {
		t.Fatal(err)
	}
	if err := ca.Send(&messages.ListPeersFrame{Type: messages.TypeListPeers, ReqID: "pl-1"}); err != nil {
		t.Fatal(err)
	}
	if pl := next[*messages.PeersListFrame](t, ca); pl.ReqID != "pl-1" || len(pl.Peers) == 0 {
		t.Fatalf("peers_list = %+v", pl)
	}

	// The broker answers our pings: RTT becomes known.
	wait.For(t, 5*time.Second, "a pong", func() bool { return ca.RTT() != 0 })

	// A local close ends the Conn with a local CloseError; Send then fails.
	ca.Close(websocket.CloseNormalClosure, "bye")
	var ce *CloseError
	if err := waitDone(t, ca); !errors.As(err, &ce) || !ce.Local || ce.Code != 1000 || ce.Reason != "bye" {
		t.Fatalf("Err = %v", err)
	}
	if err := ca.Send(sendFrame("m-2", bob.id.PublicKeyHex())); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after close = %v", err)
	}
	for range ca.Frames() { // closed after the last frame
	}
}

// TestDialPermanentMesh: a permanent-mode mesh gives the 168 h max age.
func TestDialPermanentMesh(t *testing.T) {
	b := startBroker(t, broker.Mesh{DedupeMode: broker.DedupePermanent})
	_, s := dial(t, b.config(b.member("alice")))
	if s.DedupeMode != ModePermanent || s.MaxAge() != 168*time.Hour {
		t.Fatalf("session = %+v, max age %s", s, s.MaxAge())
	}
}

// TestDialBadSignature: a hello signed with the wrong key is refused with
// the broker's code and its 1008 close.
func TestDialBadSignature(t *testing.T) {
	b := startBroker(t, broker.Mesh{})
	alice := b.member("alice")
	other, _ := meshcrypto.GenerateIdentity()
	cfg := b.config(alice)
	cfg.signWith = other
	_, _, err := Dial(context.Background(), cfg)
	var he *HelloError
	if !errors.As(err, &he) || he.Code != "bad_signature" || he.CloseCode != 1008 || he.Close != "bad_signature" {
		t.Fatalf("Dial = %v", err)
	}
}

// TestDialTimestampSkew: the hello carries a millisecond timestamp the
// broker checks.
func TestDialTimestampSkew(t *testing.T) {
	b := startBroker(t, broker.Mesh{})
	cfg := b.config(b.member("alice"))
	cfg.Now = func() time.Time { return time.Now().Add(-2 * time.Minute) }
	_, _, err := Dial(context.Background(), cfg)
	var he *HelloError
	if !errors.As(err, &he) || he.Code != "timestamp_skew" || he.CloseCode != 1008 {
		t.Fatalf("Dial = %v", err)
	}
}

func TestDialBadURL(t *testing.T) {
	id, _ := meshcrypto.GenerateIdentity()
	for _, u := range []string{"ws://127.0.0.1:1/", "ws://127.0.0.1:1/ws?x=1", "http://127.0.0.1:1/ws", "ws://127.0.0.1:1/wss"} {
		if _, _, err := Dial(context.Background(), Config{URL: u, Identity: id}); err == nil || !strings.Contains(err.Error(), "/ws") {
			t.Errorf("Dial(%s) = %v", u, err)
		}
	}
}

func TestDialContextCanceled(t *testing.T) {
	up := startUpstream(t, upstream{silent: true})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err := Dial(ctx, up.config())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial = %v", err)
	}
}

// upstream impersonates a broker that is not ours: the upstream TS broker
// (accepts the hello, ignores feature_negotiation_request) or a broker
// advertising bad parameters.
type upstream struct {
	answer   *messages.FeatureNegotiationResponseFrame // nil: ignore the request
	silent   bool                                      // never answer the hello
	deaf     bool                                      // after hello_ack, never read again (no pongs)
	prePush  bool                                      // push a message before hello_ack
	received chan map[string]any                       // frames after the hello
	closed   chan *websocket.CloseError                // the close frame the client sent
	url      string
	id       *meshcrypto.Identity
}

func startUpstream(t *testing.T, u upstream) *upstream {
	t.Helper()
	u.received = make(chan map[string]any, 16)
	u.closed = make(chan *websocket.CloseError, 1)
	quit := make(chan struct{})
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		go func() { <-quit; ws.Close() }()
		var hello messages.HelloFrame
		if err := ws.ReadJSON(&hello); err != nil || u.silent {
			<-quit
			return
		}
		if err := meshcrypto.VerifyHello(hello.Pubkey, hello.MeshID, hello.MemberID, hello.Timestamp, hello.Signature); err != nil ||
			hello.PeerType != "ai" || hello.Channel != "claudemesh-daemon" || hello.PID == 0 {
			ws.WriteJSON(map[string]any{"type": "error", "code": "bad_signature", "message": "bad hello"})
			ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1008, "bad_signature"))
			return
		}
		if u.prePush {
			ws.WriteJSON(&messages.PushFrame{Type: messages.TypePush, MessageID: "early", ClientMessageID: "early-1"})
		}
		ws.WriteJSON(&messages.HelloAckFrame{Type: messages.TypeHelloAck, PresenceID: "p-1", MemberDisplayName: "alice"})
		if u.deaf {
			<-quit
			return
		}
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					u.closed <- ce
				}
				return
			}
			var f map[string]any
			json.Unmarshal(data, &f)
			switch f["type"] {
			case messages.TypeFeatureNegotiationRequest:
				if u.answer != nil {
					ws.WriteJSON(u.answer)
				}
			case messages.TypeSend: // the upstream ack shape
				ws.WriteJSON(map[string]any{"type": "ack", "id": f["id"], "messageId": "b-" + f["id"].(string), "queued": true})
			}
			u.received <- f
		}
	}))
	t.Cleanup(func() { close(quit); srv.Close() })
	u.url = "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	u.id, _ = meshcrypto.GenerateIdentity()
	return &u
}

func (u *upstream) config() Config {
	return Config{URL: u.url, MeshID: "mesh-1", MemberID: "member-1", Identity: u.id, DisplayName: "alice",
		NegotiateTimeout: 300 * time.Millisecond}
}

func (u *upstream) closeFrame(t *testing.T) *websocket.CloseError {
	t.Helper()
	select {
	case ce := <-u.closed:
		return ce
	case <-time.After(5 * time.Second):
		t.Fatal("the server saw no close frame within 5 s")
		return nil
	}
}

func (u *upstream) frame(t *testing.T, typ string) map[string]any {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case f := <-u.received:
			if f["type"] == typ {
				return f
			}
		case <-deadline:
			t.Fatalf("the server received no %s within 5 s", typ)
			return nil
		}
	}
}

// TestNonNegotiatingBroker: strict mode refuses a broker that ignores the
// negotiation, naming --legacy-broker, and closes 4010 with the compact
// reason.
func TestNonNegotiatingBroker(t *testing.T) {
	up := startUpstream(t, upstream{})
	_, _, err := Dial(context.Background(), up.config())
	var ne *NegotiationError
	if !errors.As(err, &ne) || ne.Reason.Kind != KindUnavailable || ne.Reason.Feature != FeatureDedupe ||
		!strings.Contains(err.Error(), "--legacy-broker") {
		t.Fatalf("Dial = %v", err)
	}
	failed := up.frame(t, messages.TypeFeatureNegotiationFailed)
	if cr, _ := failed["close_reason"].(map[string]any); cr["kind"] != KindUnavailable || cr["detail"] == "" {
		t.Fatalf("feature_negotiation_failed = %v", failed)
	}
	ce := up.closeFrame(t)
	if ce.Code != 4010 || ce.Text != `{"kind":"feature_unavailable","feature":"client_message_id_dedupe"}` {
		t.Fatalf("close = %d %q", ce.Code, ce.Text)
	}
}

// TestLegacyBroker: with Legacy the same broker is used; pushes sent before
// hello_ack come first on Frames; sends work.
func TestLegacyBroker(t *testing.T) {
	up := startUpstream(t, upstream{prePush: true})
	cfg := up.config()
	cfg.Legacy = true
	c, s := dial(t, cfg)
	if !s.Legacy || s.MaxAge() != 168*time.Hour || s.PresenceID != "p-1" || s.MaxPayloadBytes != DefaultMaxPayloadBytes {
		t.Fatalf("session = %+v", s)
	}
	if p := next[*messages.PushFrame](t, c); p.ClientMessageID != "early-1" {
		t.Fatalf("first push = %+v", p)
	}
	if err := c.Send(sendFrame("m-1", strings.Repeat("cd", 32))); err != nil {
		t.Fatal(err)
	}
	if ack := next[*messages.AckFrame](t, c); ack.ID != "m-1" || ack.MessageID != "b-m-1" || !ack.Queued {
		t.Fatalf("ack = %+v", ack)
	}
	if f := up.frame(t, messages.TypeSend); f["client_message_id"] != "m-1" {
		t.Fatalf("server got %v", f)
	}
}

func goodResponse() *messages.FeatureNegotiationResponseFrame {
	return &messages.FeatureNegotiationResponseFrame{Type: messages.TypeFeatureNegotiationResponse,
		Supported: map[string]messages.Feature{
			FeatureDedupe: {Params: messages.FeatureParams{"version": 1.0, "mode": "retention_scoped",
				"dedupe_retention_days": 365.0, "request_fingerprint": true}},
			FeatureConcurrent: {Params: messages.FeatureParams{"version": 1.0, "default_policy": "prefer_newest"}},
			FeatureMaxPayload: {Params: messages.FeatureParams{"version": 1.0, "inline_bytes": 65536.0, "blob_bytes": 524288000.0}},
		}, MissingRequired: []string{}}
}

// TestBelowFloorBroker: dedupe_retention_days 2 → feature_param_below_floor.
func TestBelowFloorBroker(t *testing.T) {
	resp := goodResponse()
	resp.Supported[FeatureDedupe].Params["dedupe_retention_days"] = 2
	up := startUpstream(t, upstream{answer: resp})
	_, _, err := Dial(context.Background(), up.config())
	var ne *NegotiationError
	if !errors.As(err, &ne) || ne.Reason.Kind != KindBelowFloor || ne.Response == nil || !strings.Contains(err.Error(), "--legacy-broker") {
		t.Fatalf("Dial = %v", err)
	}
	ce := up.closeFrame(t)
	if ce.Code != 4010 || ce.Text != `{"kind":"feature_param_below_floor","feature":"client_message_id_dedupe"}` || len(ce.Text) > 123 {
		t.Fatalf("close = %d %q", ce.Code, ce.Text)
	}
}

// TestLiveness: a broker that stops reading (so never pongs) is dropped
// after ReadTimeout.
func TestLiveness(t *testing.T) {
	up := startUpstream(t, upstream{deaf: true})
	cfg := up.config()
	cfg.Legacy, cfg.PingInterval, cfg.ReadTimeout = true, 200*time.Millisecond, 500*time.Millisecond
	c, _ := dial(t, cfg)
	if err := waitDone(t, c); !errors.Is(err, ErrLiveness) {
		t.Fatalf("Err = %v", err)
	}
	if err := c.Send(sendFrame("m-1", "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send = %v", err)
	}
}

// TestHelloTimeout: no hello_ack within HelloTimeout.
func TestHelloTimeout(t *testing.T) {
	up := startUpstream(t, upstream{silent: true})
	cfg := up.config()
	cfg.HelloTimeout = 200 * time.Millisecond
	if _, _, err := Dial(context.Background(), cfg); !errors.Is(err, ErrHelloTimeout) {
		t.Fatalf("Dial = %v", err)
	}
}

// TestBrokerCloseErr: a close from the broker is the Conn's Err.
func TestBrokerCloseErr(t *testing.T) {
	b := startBroker(t, broker.Mesh{})
	alice := b.member("alice")
	cfg := b.config(alice)
	c1, _ := dial(t, cfg)
	dial(t, cfg) // same sessionId: the broker replaces the first connection
	var ce *CloseError
	if err := waitDone(t, c1); !errors.As(err, &ce) || ce.Local || ce.Code != 1000 || ce.Reason != "session_replaced" {
		t.Fatalf("Err = %v", err)
	}
}
