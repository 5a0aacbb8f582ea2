package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
	"github.com/claudemesh/claudemesh-go/transport/wsserver"
)

// refused sends hello on a new connection and checks that it is refused
// with code and closed with 1008.
func (e *env) refused(t *testing.T, hello map[string]any, code string) {
	t.Helper()
	c := e.dial()
	c.send(hello)
	if f := c.next("error"); f["code"] != code {
		t.Fatalf("error %v, want %s", f, code)
	}
	if got := c.closeCode(); got != 1008 {
		t.Fatalf("close %d, want 1008", got)
	}
}

// TestHelloReplay: a signed hello or session_hello captured and sent again,
// byte for byte, on a new connection within its clock window is refused
// with hello_replayed, even after the first connection closed; a freshly
// signed one is accepted.
func TestHelloReplay(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice := e.member("alice")
		hello := e.hello(alice, "daemon-1")
		first := e.connectWith(hello)
		e.refused(t, hello, CodeHelloReplayed)
		first.ws.Close()
		e.refused(t, hello, CodeHelloReplayed)
		e.connect(alice, "daemon-1") // signed anew

		session := e.sessionHello(alice, e.identity(), "launch-1")
		e.connectWith(session)
		e.refused(t, session, CodeHelloReplayed)
		upper := map[string]any{}
		for k, v := range session {
			upper[k] = v
		}
		upper["signature"] = strings.ToUpper(session["signature"].(string))
		e.refused(t, upper, CodeHelloReplayed)
	})
}

// TestHelloReplayAcrossReplicas: on PostgreSQL a hello accepted by one
// replica is refused as a replay by another.
func TestHelloReplayAcrossReplicas(t *testing.T) {
	url := brokertest.PostgresURL(t)
	first := startBroker(t, broker.Options{DatabaseURL: url}, noLimit)
	second := attachBroker(t, first, broker.Options{DatabaseURL: url})
	alice := first.member("alice")
	hello := first.hello(alice, "daemon-1")
	first.connectWith(hello)
	second.refused(t, hello, CodeHelloReplayed)
	session := first.sessionHello(alice, first.identity(), "launch-1")
	second.connectWith(session)
	first.refused(t, session, CodeHelloReplayed)
	second.connect(alice, "daemon-1")
}

// TestSessionNameTaken: a session of bob's may not call itself alice, in
// any disguise; its own member's name or a free one is fine.
func TestSessionNameTaken(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		for _, name := range []string{"alice", "аlice", "ALICE"} {
			h := e.sessionHello(bob, e.identity(), "launch-"+name)
			h["displayName"] = name
			e.refused(t, h, CodeDisplayNameTaken)
		}
		for _, c := range []struct {
			m    *member
			name string
		}{{bob, "Bob"}, {bob, "reviewer"}, {alice, "alice"}} {
			h := e.sessionHello(c.m, e.identity(), "launch-ok-"+c.name)
			h["displayName"] = c.name
			e.connectWith(h)
		}
	})
}

// TestMemberDirectory: a client that asks for member_directory gets the
// members with no connection in its peer lists (peerRole member, status
// offline); one that does not gets the connected peers only.
func TestMemberDirectory(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob, carol := e.member("alice"), e.member("bob"), e.member("carol")
		hidden := e.member("hidden")
		if _, err := e.store.SetProfile(t.Context(), e.mesh.ID, hidden.id.PublicKeyHex(), broker.ProfileUpdate{Visible: new(bool)}); err != nil {
			t.Fatal(err)
		}
		e.connect(carol, "carol")
		list := func(c *client) map[string]map[string]any {
			c.send(map[string]any{"type": "list_peers", "_reqId": "pl"})
			out := map[string]map[string]any{}
			for _, p := range c.next("peers_list")["peers"].([]any) {
				out[p.(map[string]any)["displayName"].(string)] = p.(map[string]any)
			}
			return out
		}
		plain := e.connect(alice, "plain")
		if got := list(plain); got["bob"] != nil || got["carol"] == nil {
			t.Fatalf("without member_directory: %v", got)
		}
		dir := e.connect(alice, "dir")
		dir.send(map[string]any{"type": "feature_negotiation_request",
			"require": []string{"client_message_id_dedupe"}, "optional": []string{"max_payload", FeatureMemberDirectory}})
		resp := dir.next("feature_negotiation_response")
		if _, ok := resp["supported"].(map[string]any)[FeatureMemberDirectory]; !ok {
			t.Fatalf("member_directory not advertised: %v", resp)
		}
		got := list(dir)
		b := got["bob"]
		if b == nil || b["pubkey"] != bob.id.PublicKeyHex() || b["peerRole"] != "member" || b["status"] != "offline" {
			t.Fatalf("bob (never connected) in the directory: %v", b)
		}
		if c := got["carol"]; c == nil || c["peerRole"] != "control-plane" {
			t.Fatalf("carol (connected) listed as %v", c)
		}
		if got["hidden"] != nil || len(got) != 3 {
			t.Fatalf("directory lists %d entries (hidden %v), want alice, bob and carol", len(got), got["hidden"])
		}
	})
}

// limitedBroker serves a broker with the given limits on unauthenticated
// connections; its URL's host is 127.0.0.1, so that clients may connect
// from other loopback addresses.
func limitedBroker(t *testing.T, limits wsserver.Limits) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := broker.Open(context.Background(), broker.Options{Dir: t.TempDir(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	b, err := Start(Options{Store: store, Limiter: ratelimit.NewMemory(noLimit), Log: log, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = b.HTTPServer() // as broker up serves it
	srv.Start()
	t.Cleanup(func() { srv.Close(); b.Close(context.Background()) })
	mesh, err := store.CreateMesh(context.Background(), broker.Mesh{Slug: "limits"})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, store: store, mesh: mesh, ws: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws", http: srv.URL}
}

// dialFrom opens a WebSocket from the loopback address source; a refused
// upgrade returns its HTTP status.
func (e *env) dialFrom(source string) (*client, int, error) {
	d := websocket.Dialer{NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}).DialContext}
	ws, resp, err := d.Dial(e.ws, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return nil, status, err
	}
	e.t.Cleanup(func() { ws.Close() })
	return &client{t: e.t, ws: ws}, 0, nil
}

// TestHelloDeadline: a connection that sends no hello is closed with 1008
// hello_timeout once the deadline passes; one that did is not.
func TestHelloDeadline(t *testing.T) {
	e := limitedBroker(t, wsserver.Limits{HelloTimeout: 300 * time.Millisecond})
	alice := e.member("alice")
	authed := e.connect(alice, "a")
	idle := e.dial()
	idle.send(map[string]any{"type": "list_peers"}) // any frame but a hello does not count
	start := time.Now()
	idle.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ce *websocket.CloseError
	for {
		_, _, err := idle.ws.ReadMessage()
		if err == nil {
			continue // the no_hello error frame
		}
		if !errors.As(err, &ce) || ce.Code != 1008 || ce.Text != "hello_timeout" {
			t.Fatalf("the silent connection ended with %v, want close 1008 hello_timeout", err)
		}
		break
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("closed after %s, before the deadline", waited)
	}
	authed.send(map[string]any{"type": "list_peers", "_reqId": "still"})
	authed.next("peers_list") // the authenticated connection is still up
}

// TestPendingCaps: unauthenticated connections are capped per source
// address and in all (429 on the upgrade); a connection that authenticates
// frees its place.
func TestPendingCaps(t *testing.T) {
	e := limitedBroker(t, wsserver.Limits{HelloTimeout: time.Minute, PendingPerSource: 2, Pending: 3, CapLoopback: true})
	alice := e.member("alice")
	var held []*client
	for range 2 {
		c, _, err := e.dialFrom("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	if _, status, err := e.dialFrom("127.0.0.1"); status != http.StatusTooManyRequests {
		t.Fatalf("a third pending connection from one address: status %d, %v; want 429", status, err)
	}
	if _, _, err := e.dialFrom("127.0.0.2"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	if _, status, _ := e.dialFrom("127.0.0.3"); status != http.StatusTooManyRequests {
		t.Fatalf("a fourth pending connection in all: status %d, want 429", status)
	}
	held[0].send(e.hello(alice, "a"))
	held[0].next("hello_ack")
	// The place is freed before hello_ack; a 429 is retried only to be safe.
	var (
		c      *client
		status int
		err    error
	)
	if werr := wait.Until(5*time.Second, "a place after one authenticated", func() bool {
		c, status, err = e.dialFrom("127.0.0.1")
		return err == nil || status != http.StatusTooManyRequests
	}); werr != nil || err != nil {
		t.Fatalf("after one authenticated: %d, %v (%v)", status, err, werr)
	}
	c.send(e.hello(alice, "b"))
	c.next("hello_ack")
	held[1].ws.Close()
	wait.For(t, 5*time.Second, "a closed pending connection to free its place", func() bool { // the server notices the close asynchronously
		_, _, err := e.dialFrom("127.0.0.1")
		return err == nil
	})

	// Without CapLoopback, one loopback address may hold the whole cap.
	loose := limitedBroker(t, wsserver.Limits{HelloTimeout: time.Minute, PendingPerSource: 1, Pending: 2})
	for range 2 {
		if _, _, err := loose.dialFrom("127.0.0.1"); err != nil {
			t.Fatalf("a loopback source under the overall cap: %v", err)
		}
	}
	if _, status, _ := loose.dialFrom("127.0.0.1"); status != http.StatusTooManyRequests {
		t.Fatalf("past the overall cap: status %d, want 429", status)
	}
}
