package broker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// env is a real broker (real store, real actors, real WebSockets over
// loopback) started in the test process.
type env struct {
	t     testing.TB
	store *broker.Store
	mesh  *broker.Mesh
	ws    string
	http  string
}

// backends runs fn against a broker on SQLite and one on PostgreSQL.
func backends(t *testing.T, limits ratelimit.Options, fn func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, startBroker(t, broker.Options{Dir: t.TempDir()}, limits)) })
	t.Run("postgres", func(t *testing.T) {
		fn(t, startBroker(t, broker.Options{DatabaseURL: brokertest.PostgresURL(t)}, limits))
	})
}

func startBroker(t testing.TB, opts broker.Options, limits ratelimit.Options) *env {
	t.Helper()
	return startBrokerWith(t, opts, ratelimit.NewMemory(limits))
}

// startBrokerWith starts a broker with its own mesh and the given limiter.
func startBrokerWith(t testing.TB, opts broker.Options, limiter ratelimit.Limiter) *env {
	t.Helper()
	e := serveBrokerWith(t, opts, limiter)
	mesh, err := e.store.CreateMesh(context.Background(), broker.Mesh{Slug: "test"})
	if err != nil {
		t.Fatal(err)
	}
	e.mesh = mesh
	return e
}

// attachBroker starts a second broker on the database of first (another
// replica), serving the same mesh.
func attachBroker(t testing.TB, first *env, opts broker.Options) *env {
	t.Helper()
	e := serveBrokerWith(t, opts, ratelimit.NewMemory(noLimit))
	e.mesh = first.mesh
	return e
}

func serveBrokerWith(t testing.TB, opts broker.Options, limiter ratelimit.Limiter) *env {
	t.Helper()
	return serveBrokerTimed(t, opts, limiter, testLease, testGrace)
}

// backendsTimed runs fn against a broker on each backend with the given
// delivery lease and presence grace, and a mesh of its own.
func backendsTimed(t *testing.T, lease, grace time.Duration, fn func(t *testing.T, e *env)) {
	for _, backend := range []struct {
		name string
		opts func(t *testing.T) broker.Options
	}{
		{"sqlite", func(t *testing.T) broker.Options { return broker.Options{Dir: t.TempDir()} }},
		{"postgres", func(t *testing.T) broker.Options { return broker.Options{DatabaseURL: brokertest.PostgresURL(t)} }},
	} {
		t.Run(backend.name, func(t *testing.T) {
			e := serveBrokerTimed(t, backend.opts(t), ratelimit.NewMemory(noLimit), lease, grace)
			mesh, err := e.store.CreateMesh(context.Background(), broker.Mesh{Slug: "timed"})
			if err != nil {
				t.Fatal(err)
			}
			e.mesh = mesh
			fn(t, e)
		})
	}
}

// serveBrokerTimed is serveBrokerWith with the given delivery lease and
// presence grace.
func serveBrokerTimed(t testing.TB, opts broker.Options, limiter ratelimit.Limiter, lease, grace time.Duration) *env {
	t.Helper()
	return serveBrokerOpts(t, opts, Options{Limiter: limiter, PresenceGrace: grace, DeliveryLease: lease,
		RevocationCheck: testRevocationCheck})
}

// serveBrokerOpts starts a broker with these options on a store opened
// with opts; the store and the log are filled in.
func serveBrokerOpts(t testing.TB, opts broker.Options, bo Options) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("BROKER_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	opts.Log = log
	store, err := broker.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	bo.Store, bo.Log = store, log
	b, err := Start(bo)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = b.HTTPServer() // as broker up serves it
	srv.Start()
	t.Cleanup(func() { srv.Close(); b.Close(context.Background()) })
	return &env{t: t, store: store, ws: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws", http: srv.URL}
}

// testGrace is the presence grace of test brokers.
const testGrace = 200 * time.Millisecond

// testLease is the delivery lease of test brokers.
const testLease = time.Second

// testRevocationCheck is how often test brokers look for revoked members.
const testRevocationCheck = 50 * time.Millisecond

// member is a mesh member with its key.
type member struct {
	id  *meshcrypto.Identity
	row *broker.Member
}

func (e *env) member(name string) *member {
	e.t.Helper()
	id, err := meshcrypto.GenerateIdentity()
	if err != nil {
		e.t.Fatal(err)
	}
	inv, err := e.store.CreateInvite(context.Background(), broker.InviteRequest{MeshSlug: e.mesh.Slug, BrokerURL: "ws://127.0.0.1/ws", Uses: 1, TTL: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	joined, err := e.store.RedeemInvite(context.Background(), inv.Token, id.PublicKeyHex(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return &member{id: id, row: joined.Member}
}

// client is one WebSocket to the broker.
type client struct {
	t    testing.TB
	ws   *websocket.Conn
	seen []map[string]any // frames read while waiting for another type
}

func (e *env) dial() *client {
	e.t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(e.ws, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	c := &client{t: e.t, ws: ws}
	e.t.Cleanup(func() { ws.Close() })
	return c
}

// hello builds a signed hello for m; edit may change it before sending.
func (e *env) hello(m *member, sessionID string) map[string]any {
	ts := helloTimestamp()
	return map[string]any{"type": "hello", "meshId": e.mesh.ID, "memberId": m.row.ID, "pubkey": m.id.PublicKeyHex(),
		"sessionId": sessionID, "timestamp": ts, "displayName": m.row.DisplayName,
		"signature": meshcrypto.HelloSignature(m.id, e.mesh.ID, m.row.ID, ts)}
}

// connect dials and completes the hello of m.
func (e *env) connect(m *member, sessionID string) *client {
	e.t.Helper()
	return e.connectWith(e.hello(m, sessionID))
}

// connectWith dials and completes the given hello or session_hello.
func (e *env) connectWith(hello map[string]any) *client {
	e.t.Helper()
	c := e.dial()
	c.send(hello)
	c.next("hello_ack")
	return c
}

// identity is a fresh key pair (a session key).
func (e *env) identity() *meshcrypto.Identity {
	e.t.Helper()
	id, err := meshcrypto.GenerateIdentity()
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// sessionHello builds a signed session_hello of session key s under m,
// attested for an hour; edit it (groups, displayName) before sending.
func (e *env) sessionHello(m *member, s *meshcrypto.Identity, sessionID string) map[string]any {
	now := helloTimestamp()
	expires := now + time.Hour.Milliseconds()
	return map[string]any{"type": "session_hello", "meshId": e.mesh.ID, "parentMemberId": m.row.ID,
		"parentMemberPubkey": m.id.PublicKeyHex(), "sessionPubkey": s.PublicKeyHex(),
		"parentAttestation": map[string]any{"sessionPubkey": s.PublicKeyHex(), "parentMemberPubkey": m.id.PublicKeyHex(),
			"expiresAt": expires, "signature": meshcrypto.SessionAttestation(m.id, s.PublicKeyHex(), expires)},
		"sessionId": sessionID, "timestamp": now,
		"signature": meshcrypto.SessionHelloSignature(s, e.mesh.ID, m.id.PublicKeyHex(), now)}
}

func (c *client) send(v any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(v); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next frame of type typ (frames of other types are kept
// in seen), failing after 5 s.
func (c *client) next(typ string) map[string]any {
	c.t.Helper()
	for i, f := range c.seen {
		if f["type"] == typ {
			c.seen = append(c.seen[:i], c.seen[i+1:]...)
			return f
		}
	}
	c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v (seen %v)", typ, err, c.seen)
		}
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			c.t.Fatalf("frame is not JSON: %s", data)
		}
		if f["type"] == typ {
			return f
		}
		c.seen = append(c.seen, f)
	}
}

// closeCode reads until the connection closes and returns the close code.
func (c *client) closeCode() int {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := c.ws.ReadMessage(); err != nil {
			if ce, ok := err.(*websocket.CloseError); ok {
				return ce.Code
			}
			c.t.Fatalf("connection ended without a close frame: %v", err)
		}
	}
}

// sendFrame is a send with a fixed fingerprint derived from body.
func sendFrame(id, to, body string) map[string]any {
	fp := strings.Repeat("ab", 32)
	if body != "hello" {
		fp = strings.Repeat("cd", 32)
	}
	return map[string]any{"type": "send", "id": id, "client_message_id": id, "request_fingerprint": fp,
		"targetSpec": to, "priority": "next", "nonce": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "ciphertext": body}
}

// helloTimestamp is now in Unix ms, but always later than the last one it
// returned: the broker refuses a signed hello it has seen (hello_replayed),
// and two hellos of one key in one millisecond would be one.
func helloTimestamp() int64 {
	lastHelloMu.Lock()
	defer lastHelloMu.Unlock()
	lastHello = max(time.Now().UnixMilli(), lastHello+1)
	return lastHello
}

var (
	lastHelloMu sync.Mutex
	lastHello   int64
)

func signHello(m *member, meshID, memberID string, ts int64) string {
	return meshcrypto.HelloSignature(m.id, meshID, memberID, ts)
}

// push returns the next message push, passing over presence events, and
// acknowledges it as a daemon would (else the lease would redeliver it).
func (c *client) push() map[string]any {
	c.t.Helper()
	p := c.unacked()
	c.send(map[string]any{"type": "client_ack", "clientMessageId": p["client_message_id"], "brokerMessageId": p["messageId"]})
	return p
}

// unacked returns the next message push without acknowledging it.
func (c *client) unacked() map[string]any {
	c.t.Helper()
	for {
		if p := c.next("push"); p["subtype"] != "system" {
			return p
		}
	}
}
