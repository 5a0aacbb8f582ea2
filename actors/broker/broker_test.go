package broker

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
)

var noLimit = ratelimit.Options{Limit: 1_000_000, Window: time.Minute}

// TestDedupeContract: first send 201 and one push; the same id and
// fingerprint 200 duplicate with the original broker_message_id and no
// second push; the same id with another fingerprint 409.
func TestDedupeContract(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		a.send(sendFrame("m-1", bob.id.PublicKeyHex(), "hello"))
		ack := a.next("ack")
		if ack["code"] != float64(201) || ack["queued"] != true || ack["messageId"] == "" || ack["id"] != "m-1" {
			t.Fatalf("first ack %v", ack)
		}
		push := b.push()
		if push["client_message_id"] != "m-1" || push["messageId"] != ack["broker_message_id"] || push["senderPubkey"] != alice.id.PublicKeyHex() {
			t.Fatalf("push %v", push)
		}
		a.send(sendFrame("m-1", bob.id.PublicKeyHex(), "hello"))
		dup := a.next("ack")
		if dup["code"] != float64(200) || dup["duplicate"] != true || dup["broker_message_id"] != ack["broker_message_id"] {
			t.Fatalf("duplicate ack %v", dup)
		}
		a.send(sendFrame("m-1", bob.id.PublicKeyHex(), "other"))
		conflict := a.next("ack")
		if conflict["code"] != float64(409) || conflict["error"] != "idempotency_key_reused" || len(fmt.Sprint(conflict["broker_fingerprint_prefix"])) != 16 {
			t.Fatalf("conflict ack %v", conflict)
		}
		// A marker message proves no second push of m-1 is in between.
		a.send(sendFrame("m-2", bob.id.PublicKeyHex(), "hello"))
		a.next("ack")
		if next := b.push(); next["client_message_id"] != "m-2" {
			t.Fatalf("bob got %v after the duplicate, want m-2", next)
		}
	})
}

// TestConcurrentSameID: 100 concurrent sends of one id on 4 connections →
// one message, one push.
func TestConcurrentSameID(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		b := e.connect(bob, "b")
		var conns []*client
		for i := 0; i < 4; i++ {
			conns = append(conns, e.connect(alice, fmt.Sprint("a", i)))
		}
		var wg sync.WaitGroup
		codes := make(chan any, 100)
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 25; j++ {
					c.send(sendFrame("same", bob.id.PublicKeyHex(), "hello"))
				}
				for j := 0; j < 25; j++ {
					codes <- c.next("ack")["code"]
				}
			}()
		}
		b.push() // read and ack the one push while the duplicates are answered
		wg.Wait()
		close(codes)
		created := 0
		for code := range codes {
			switch code {
			case float64(201):
				created++
			case float64(200):
			default:
				t.Fatalf("ack code %v", code)
			}
		}
		if created != 1 {
			t.Fatalf("%d sends created a message, want 1", created)
		}
		conns[0].send(sendFrame("marker", bob.id.PublicKeyHex(), "hello"))
		conns[0].next("ack")
		if next := b.push(); next["client_message_id"] != "marker" {
			t.Fatalf("bob got a second push %v", next)
		}
	})
}

// TestOfflineDMIsQueued: a DM to a member with no connection is accepted,
// then pushed when it connects; client_ack ends redelivery.
func TestOfflineDMIsQueued(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a := e.connect(alice, "a")
		a.send(sendFrame("q-1", bob.id.PublicKeyHex(), "hello"))
		if ack := a.next("ack"); ack["code"] != float64(201) {
			t.Fatalf("ack %v", ack)
		}
		b := e.connect(bob, "b")
		push := b.push()
		if push["client_message_id"] != "q-1" {
			t.Fatalf("push %v", push)
		}
		b.ws.Close()
		b2 := e.connect(bob, "b")
		a.send(sendFrame("q-2", bob.id.PublicKeyHex(), "hello"))
		a.next("ack")
		// The new connection's admission writes the acks batched before it
		// (b's client_ack of q-1) and then frees its key's leases, so q-1 is
		// not pushed again — unless b's ack, which travels on the other
		// connection, reaches the broker after b2's hello: at least once,
		// the receiver dedupes. Nothing else may come before q-2.
		next := b2.push()
		if next["client_message_id"] == "q-1" {
			next = b2.push()
		}
		if next["client_message_id"] != "q-2" {
			t.Fatalf("after the ack bob got %v, want q-2 (after at most one repeat of q-1)", next)
		}
	})
}

// TestBroadcastAndTopic: `*` reaches every other member, live, and
// `#<id>` every other member joined to the topic.
func TestBroadcastAndTopic(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob, carol := e.member("alice"), e.member("bob"), e.member("carol")
		a, b, c := e.connect(alice, "a"), e.connect(bob, "b"), e.connect(carol, "c")
		id := createTopic(t, a, "builds")
		joinTopic(t, b, id)
		joinTopic(t, c, id)
		a.send(sendFrame("t-1", "#"+id, "hello"))
		if ack := a.next("ack"); ack["code"] != float64(201) {
			t.Fatalf("ack %v", ack)
		}
		for _, r := range []*client{b, c} {
			if p := r.push(); p["topic"] != id || p["client_message_id"] != "t-1" {
				t.Fatalf("topic push %v", p)
			}
		}
		a.send(sendFrame("t-2", "*", "hello"))
		a.next("ack")
		for _, r := range []*client{b, c} {
			if p := r.push(); p["client_message_id"] != "t-2" {
				t.Fatalf("broadcast push %v", p)
			}
		}
	})
}

// TestHelloRejections covers the hello checks and their close codes.
func TestHelloRejections(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice := e.member("alice")
		cases := []struct {
			name  string
			edit  func(h map[string]any)
			code  string
			close int
		}{
			{"bad signature", func(h map[string]any) { h["signature"] = fmt.Sprintf("%0128x", 1) }, "bad_signature", 1008},
			{"malformed signature", func(h map[string]any) { h["signature"] = "zz" }, "malformed", 1008},
			{"skew", func(h map[string]any) {
				h["timestamp"] = time.Now().Add(-2 * time.Minute).UnixMilli()
			}, "timestamp_skew", 1008},
			{"wrong memberId", func(h map[string]any) { h["memberId"] = "someone-else" }, "bad_signature", 1008},
			{"unknown mesh", func(h map[string]any) { h["meshId"] = "nope" }, "bad_signature", 1008},
			{"bad session pubkey", func(h map[string]any) { h["sessionPubkey"] = "ABC" }, "bad_session_pubkey", 1008},
		}
		for _, c := range cases {
			cl := e.dial()
			h := e.hello(alice, "x")
			c.edit(h)
			cl.send(h)
			if f := cl.next("error"); f["code"] != c.code {
				t.Errorf("%s: error %v, want %s", c.name, f, c.code)
			}
			if code := cl.closeCode(); code != c.close {
				t.Errorf("%s: close %d, want %d", c.name, code, c.close)
			}
		}
		// memberId must match the key (signed over the wrong id too).
		bob := e.member("bob")
		cl := e.dial()
		ts := time.Now().UnixMilli()
		h := e.hello(alice, "x")
		h["memberId"], h["timestamp"] = bob.row.ID, ts
		h["signature"] = signHello(alice, e.mesh.ID, bob.row.ID, ts)
		cl.send(h)
		if f := cl.next("error"); f["code"] != "member_id_mismatch" {
			t.Errorf("member id mismatch: %v", f)
		}
		// revoked → 4002
		if err := e.store.RevokeMember(t.Context(), e.mesh.ID, bob.id.PublicKeyHex()); err != nil {
			t.Fatal(err)
		}
		cl = e.dial()
		cl.send(e.hello(bob, "y"))
		if f := cl.next("error"); f["code"] != "revoked" {
			t.Errorf("revoked: %v", f)
		}
		if code := cl.closeCode(); code != 4002 {
			t.Errorf("revoked close %d, want 4002", code)
		}
	})
}

// TestBadFrames: each malformed frame gets a specific error frame and the
// connection stays up.
func TestBadFrames(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice := e.member("alice")
		c := e.dial()
		c.send(map[string]any{"type": "send"})
		if f := c.next("error"); f["code"] != "no_hello" {
			t.Fatalf("before hello: %v", f)
		}
		c.send(e.hello(alice, "a"))
		c.next("hello_ack")
		for raw, code := range map[string]string{`not json`: "invalid_frame", `{"type":"graph_query"}`: "unknown_message_type",
			`{"type":"send","priority":5}`: "invalid_frame"} {
			if err := c.ws.WriteMessage(1, []byte(raw)); err != nil {
				t.Fatal(err)
			}
			if f := c.next("error"); f["code"] != code {
				t.Errorf("%s: %v, want %s", raw, f, code)
			}
		}
		bad := sendFrame("b-1", "nobody", "hello")
		c.send(bad)
		if ack := c.next("ack"); ack["code"] != float64(400) || ack["error"] != "invalid_target" {
			t.Errorf("bad target: %v", ack)
		}
		c.send(sendFrame("b-2", fmt.Sprintf("%064x", 7), "hello"))
		if ack := c.next("ack"); ack["code"] != float64(404) || ack["error"] != "unknown_recipient" {
			t.Errorf("DM to a non-member: %v", ack)
		}
		if row, _ := e.store.LookupDedupe(t.Context(), e.mesh.ID, alice.id.PublicKeyHex(), "b-2"); row != nil {
			t.Error("a rejected send left a dedupe row")
		}
	})
}

// TestNegotiation: the broker advertises the delivery contract; a client
// requiring something else gets feature_negotiation_failed and 4010.
func TestNegotiation(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice := e.member("alice")
		c := e.connect(alice, "a")
		c.send(map[string]any{"type": "feature_negotiation_request",
			"require": []string{"client_message_id_dedupe", "concurrent_connection_policy"}, "optional": []string{"max_payload"}})
		resp := c.next("feature_negotiation_response")
		dedupe := resp["supported"].(map[string]any)["client_message_id_dedupe"].(map[string]any)["params"].(map[string]any)
		if dedupe["request_fingerprint"] != true || dedupe["dedupe_retention_days"] != float64(365) || dedupe["version"] != float64(1) {
			t.Fatalf("dedupe params %v", dedupe)
		}
		if missing := resp["missing_required"].([]any); len(missing) != 0 {
			t.Fatalf("missing %v", missing)
		}
		c2 := e.connect(alice, "b")
		c2.send(map[string]any{"type": "feature_negotiation_request", "require": []string{"mesh_skill_share"}})
		c2.next("feature_negotiation_response")
		failed := c2.next("feature_negotiation_failed")
		if r := failed["close_reason"].(map[string]any); r["kind"] != "feature_unavailable" || r["feature"] != "mesh_skill_share" {
			t.Fatalf("failed frame %v", failed)
		}
		if code := c2.closeCode(); code != 4010 {
			t.Fatalf("close %d, want 4010", code)
		}
	})
}

// TestRateLimitSparesRetries: with the window's budget spent, a new id is
// rejected 429 but a retry of a committed id answers 200 duplicate.
func TestRateLimitSparesRetries(t *testing.T) {
	backends(t, ratelimit.Options{Limit: 2, Window: time.Hour}, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a := e.connect(alice, "a")
		for _, id := range []string{"r-1", "r-2"} {
			a.send(sendFrame(id, bob.id.PublicKeyHex(), "hello"))
			if ack := a.next("ack"); ack["code"] != float64(201) {
				t.Fatalf("%s: %v", id, ack)
			}
		}
		a.send(sendFrame("r-3", bob.id.PublicKeyHex(), "hello"))
		if ack := a.next("ack"); ack["code"] != float64(429) || ack["error"] != "rate_limited" || ack["retry_after_ms"] == nil {
			t.Fatalf("over budget: %v", ack)
		}
		a.send(sendFrame("r-1", bob.id.PublicKeyHex(), "hello"))
		if ack := a.next("ack"); ack["code"] != float64(200) || ack["duplicate"] != true {
			t.Fatalf("retry in a saturated window: %v", ack)
		}
	})
}

// TestFirstSendMark: a send marked first_send skips B0 and still answers
// as the contract says — a committed id (the mark wrong) 200 duplicate
// with no second push, another fingerprint 409 — and when the limiter
// refuses it, B0 runs after all: a committed id is answered duplicate in a
// later, spent window, never 429.
func TestFirstSendMark(t *testing.T) {
	clock := brokertest.NewClock(time.Now())
	backends(t, ratelimit.Options{Limit: 2, Window: time.Hour, Now: clock.Now}, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		first := func(id, body string) map[string]any {
			f := sendFrame(id, bob.id.PublicKeyHex(), body)
			f["first_send"] = true
			a.send(f)
			return a.next("ack")
		}
		ack := first("f-1", "hello")
		if ack["code"] != float64(201) {
			t.Fatalf("first: %v", ack)
		}
		b.push()
		if dup := first("f-1", "hello"); dup["code"] != float64(200) || dup["duplicate"] != true ||
			dup["broker_message_id"] != ack["broker_message_id"] {
			t.Fatalf("a committed id marked first: %v", dup)
		}
		if c := first("f-1", "other"); c["code"] != float64(409) || c["error"] != "idempotency_key_reused" {
			t.Fatalf("another fingerprint marked first: %v", c)
		}
		clock.Advance(time.Hour) // a new window, spent by two new ids
		for _, id := range []string{"f-2", "f-3"} {
			if ack := first(id, "hello"); ack["code"] != float64(201) {
				t.Fatalf("%s: %v", id, ack)
			}
		}
		if ack := first("f-4", "hello"); ack["code"] != float64(429) {
			t.Fatalf("a new id over budget: %v", ack)
		}
		if dup := first("f-1", "hello"); dup["code"] != float64(200) || dup["duplicate"] != true {
			t.Fatalf("a committed id marked first in a spent window: %v", dup)
		}
		clock.Advance(time.Hour)
		if ack := first("f-5", "marker"); ack["code"] != float64(201) {
			t.Fatalf("marker: %v", ack)
		}
		for _, want := range []string{"f-2", "f-3", "f-5"} {
			if p := b.push(); p["client_message_id"] != want {
				t.Fatalf("bob got %v, want %s (and no second f-1)", p["client_message_id"], want)
			}
		}
	})
}

// TestPeersAndProfile: list_peers shows connected members with their
// profile; set_* changes persist.
func TestPeersAndProfile(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		if j := a.next("push"); j["event"] != "peer_joined" {
			t.Fatalf("alice got %v, want bob's peer_joined", j)
		}
		b.send(map[string]any{"type": "set_summary", "summary": "reviewing"})
		b.send(map[string]any{"type": "set_profile", "title": "reviewer", "capabilities": []string{"review"}, "_reqId": "p1"})
		if ack := b.next("ack"); ack["id"] != "p1" {
			t.Fatalf("set_profile ack %v", ack)
		}
		a.send(map[string]any{"type": "list_peers", "_reqId": "pl-1"})
		list := a.next("peers_list")
		if list["_reqId"] != "pl-1" || len(list["peers"].([]any)) != 2 {
			t.Fatalf("peers %v", list)
		}
		for _, p := range list["peers"].([]any) {
			peer := p.(map[string]any)
			if peer["pubkey"] == bob.id.PublicKeyHex() && (peer["summary"] != "reviewing" || peer["title"] != "reviewer") {
				t.Fatalf("bob's entry %v", peer)
			}
		}
		m, err := e.store.MemberByPubkey(t.Context(), e.mesh.ID, bob.id.PublicKeyHex())
		if err != nil || m.Summary != "reviewing" || m.Title != "reviewer" {
			t.Fatalf("stored profile %+v %v", m, err)
		}
	})
}

// TestStatusHoldsPushes: a member whose status is working or dnd gets only
// priority "now" pushes; "next" ones wait in its queue and are pushed when
// it is idle again. An unknown status is refused.
func TestStatusHoldsPushes(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		b.send(map[string]any{"type": "set_status", "status": "away"})
		if f := b.next("error"); f["code"] != "invalid_status" {
			t.Fatalf("set_status away: %v", f)
		}
		b.send(map[string]any{"type": "set_status", "status": "dnd"})
		b.send(map[string]any{"type": "list_peers", "_reqId": "sync"}) // frames are handled in order: dnd is in force
		b.next("peers_list")
		a.send(sendFrame("held", bob.id.PublicKeyHex(), "hello"))
		a.next("ack")
		urgent := sendFrame("urgent", bob.id.PublicKeyHex(), "hello")
		urgent["priority"] = "now"
		a.send(urgent)
		a.next("ack")
		if p := b.push(); p["client_message_id"] != "urgent" {
			t.Fatalf("bob (dnd) got %v, want only the priority-now message", p)
		}
		b.send(map[string]any{"type": "set_status", "status": "idle"})
		if p := b.push(); p["client_message_id"] != "held" {
			t.Fatalf("bob (idle again) got %v, want the held message", p)
		}
	})
}

// TestTwoReplicas: two brokers on one PostgreSQL database serve one mesh.
// A DM from a client of the first to a client of the second is pushed live
// (LISTEN/NOTIFY), and dedupe holds across them.
func TestTwoReplicas(t *testing.T) {
	url := brokertest.PostgresURL(t)
	first := startBroker(t, broker.Options{DatabaseURL: url}, noLimit)
	second := attachBroker(t, first, broker.Options{DatabaseURL: url})
	alice, bob := first.member("alice"), first.member("bob")
	a := first.connect(alice, "a")
	b := second.connect(bob, "b")
	a.send(sendFrame("x-1", bob.id.PublicKeyHex(), "hello"))
	if ack := a.next("ack"); ack["code"] != float64(201) {
		t.Fatalf("ack %v", ack)
	}
	if p := b.push(); p["client_message_id"] != "x-1" {
		t.Fatalf("push on the other replica %v", p)
	}
	a2 := second.connect(alice, "a2")
	a2.send(sendFrame("x-1", bob.id.PublicKeyHex(), "hello"))
	if ack := a2.next("ack"); ack["code"] != float64(200) || ack["duplicate"] != true {
		t.Fatalf("the same id through the other replica: %v", ack)
	}
}

// TestMetrics: /metrics counts accepts by outcome and rate-limit rejections.
func TestMetrics(t *testing.T) {
	e := startBroker(t, broker.Options{Dir: t.TempDir()}, ratelimit.Options{Limit: 1, Window: time.Hour})
	alice, bob := e.member("alice"), e.member("bob")
	a := e.connect(alice, "a")
	first := sendFrame("1", bob.id.PublicKeyHex(), "hello")
	first["first_send"] = true
	for _, f := range []map[string]any{first, sendFrame("1", bob.id.PublicKeyHex(), "hello"),
		sendFrame("1", bob.id.PublicKeyHex(), "other"), sendFrame("2", bob.id.PublicKeyHex(), "hello")} {
		a.send(f)
		a.next("ack")
	}
	resp, err := http.Get(e.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`cm_broker_accept_total{outcome="created"} 1`, `cm_broker_accept_total{outcome="duplicate"} 1`,
		`cm_broker_accept_total{outcome="conflict"} 1`, `cm_broker_accept_total{outcome="rate_limited"} 1`,
		`cm_broker_rate_limit_rejection_total 1`, `cm_broker_first_send_total 1`, `cm_broker_connections 1`, "go_goroutines ", "process_resident_memory_bytes "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestPresenceGrace: a reconnect within the grace is silent; a connection
// that stays away past it is announced with peer_left.
func TestPresenceGrace(t *testing.T) {
	e := startBroker(t, broker.Options{Dir: t.TempDir()}, noLimit)
	alice, bob := e.member("alice"), e.member("bob")
	a := e.connect(alice, "a")
	b := e.connect(bob, "b")
	if j := a.next("push"); j["event"] != "peer_joined" {
		t.Fatalf("want bob's peer_joined, got %v", j)
	}
	b.ws.Close()
	b = e.connect(bob, "b") // same sessionId, within the grace: a reattach
	b.ws.Close()
	left := a.next("push")
	if left["event"] != "peer_left" {
		t.Fatalf("after bob stayed away: %v, want peer_left (and no second peer_joined)", left)
	}
}

// TestReplicasShareRedisBudget: two replicas with the Redis limiter share
// one rate budget per mesh.
func TestReplicasShareRedisBudget(t *testing.T) {
	redisURL := os.Getenv("CLAUDEMESH_TEST_REDIS_URL")
	if redisURL == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CLAUDEMESH_TEST_REDIS_URL is not set; CI must run the Redis variant")
		}
		t.Skip("CLAUDEMESH_TEST_REDIS_URL is not set")
	}
	limits := ratelimit.Options{Limit: 1, Window: time.Hour, Prefix: "cmtest:" + t.Name() + ":" + fmt.Sprint(time.Now().UnixNano()) + ":"}
	limiter := func() ratelimit.Limiter {
		l, err := ratelimit.NewRedis(t.Context(), redisURL, limits)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	url := brokertest.PostgresURL(t)
	first := startBrokerWith(t, broker.Options{DatabaseURL: url}, limiter())
	second := serveBrokerWith(t, broker.Options{DatabaseURL: url}, limiter())
	second.mesh = first.mesh
	alice, bob := first.member("alice"), first.member("bob")
	a1, a2 := first.connect(alice, "a1"), second.connect(alice, "a2")
	a1.send(sendFrame("s-1", bob.id.PublicKeyHex(), "hello"))
	if ack := a1.next("ack"); ack["code"] != float64(201) {
		t.Fatalf("first replica: %v", ack)
	}
	a2.send(sendFrame("s-2", bob.id.PublicKeyHex(), "hello"))
	if ack := a2.next("ack"); ack["code"] != float64(429) {
		t.Fatalf("second replica, budget spent on the first: %v, want 429", ack)
	}
}

// TestRevokedMemberDisconnected: a member revoked in the database (as
// `claudemesh broker member revoke` does, from another process) is
// disconnected by the running broker — the revoked error, then close 4002 —
// leaves the peer list and is refused at its next hello.
func TestRevokedMemberDisconnected(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		if err := e.store.RevokeMember(t.Context(), e.mesh.ID, bob.id.PublicKeyHex()); err != nil {
			t.Fatal(err)
		}
		if f := b.next("error"); f["code"] != "revoked" {
			t.Fatalf("bob got %v, want the revoked error", f)
		}
		if code := b.closeCode(); code != 4002 {
			t.Fatalf("bob's connection closed %d, want 4002", code)
		}
		a.send(map[string]any{"type": "list_peers", "_reqId": "p"})
		for _, p := range a.next("peers_list")["peers"].([]any) {
			if p.(map[string]any)["pubkey"] == bob.id.PublicKeyHex() {
				t.Fatalf("bob is still in the peer list: %v", p)
			}
		}
		again := e.dial()
		again.send(e.hello(bob, "b"))
		if f := again.next("error"); f["code"] != "revoked" || again.closeCode() != 4002 {
			t.Fatalf("bob's next hello: %v", f)
		}
		t.Log("a revoked member was disconnected, left the peer list and was refused at its next hello")
	})
}

// unackedID reads c's pushes, without acking them, until one of id.
func unackedID(c *client, id string) {
	c.t.Helper()
	for c.unacked()["client_message_id"] != id {
	}
}

// TestGroupAndSessionHello: a session connection (session_hello with a
// member attestation) claims a group; @group reaches it and not members
// outside the group.
func TestGroupAndSessionHello(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob, carol := e.member("alice"), e.member("bob"), e.member("carol")
		session := e.identity()
		hello := e.sessionHello(bob, session, "launch-1")
		hello["groups"] = []map[string]any{{"name": "reviewers"}}
		s := e.connectWith(hello)
		a, c := e.connect(alice, "a"), e.connect(carol, "c")
		a.send(sendFrame("g-1", "@reviewers", "hello"))
		if ack := a.next("ack"); ack["code"] != float64(201) {
			t.Fatalf("ack %v", ack)
		}
		if p := s.push(); p["client_message_id"] != "g-1" {
			t.Fatalf("session push %v", p)
		}
		a.send(sendFrame("g-2", carol.id.PublicKeyHex(), "hello"))
		a.next("ack")
		if p := c.push(); p["client_message_id"] != "g-2" {
			t.Fatalf("carol got %v before her own DM: the group message reached her", p)
		}
		// A session key as a DM target reaches that session.
		c.send(sendFrame("g-3", session.PublicKeyHex(), "hello"))
		if ack := c.next("ack"); ack["code"] != float64(201) {
			t.Fatalf("DM to a session key: %v", ack)
		}
		if p := s.push(); p["client_message_id"] != "g-3" {
			t.Fatalf("session DM %v", p)
		}
	})
}
