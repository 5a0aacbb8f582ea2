package broker

import (
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
	"github.com/claudemesh/claudemesh-go/transport/wsserver"
)

// sessionGrace keeps a closed session's presence for the whole test, so
// that a DM to its key queues for its reconnect (a session key the hub no
// longer knows is no one's: 404).
const sessionGrace = time.Minute

// peer is one connection of a sessionMesh and the key it receives for.
type peer struct {
	name string
	tag  string // in ids
	c    *client
	key  string
}

// sessionMesh is alice with her member connection and two session
// connections (sessions A and B, B in the group "reviewers"), and bob with
// his member connection.
type sessionMesh struct {
	alice                 *member
	member, a, b, bobPeer *peer
	helloA                func() map[string]any // a fresh session_hello of A, to reconnect it
}

func newSessionMesh(e *env) *sessionMesh {
	alice, bob := e.member("alice"), e.member("bob")
	keyA, keyB := e.identity(), e.identity()
	helloA := func() map[string]any {
		h := e.sessionHello(alice, keyA, "session-a")
		h["displayName"] = "alice (A)"
		return h
	}
	helloB := e.sessionHello(alice, keyB, "session-b")
	helloB["groups"] = []map[string]any{{"name": "reviewers"}}
	return &sessionMesh{alice: alice, helloA: helloA,
		member:  &peer{name: "alice's member connection", tag: "member", c: e.connect(alice, "control"), key: alice.id.PublicKeyHex()},
		a:       &peer{name: "session A", tag: "A", c: e.connectWith(helloA()), key: keyA.PublicKeyHex()},
		b:       &peer{name: "session B", tag: "B", c: e.connectWith(helloB), key: keyB.PublicKeyHex()},
		bobPeer: &peer{name: "bob", tag: "bob", c: e.connect(bob, "bob"), key: bob.id.PublicKeyHex()},
	}
}

// peers are the connections of the mesh, bob's first (he sends the
// markers of reached).
func (s *sessionMesh) peers() []*peer { return []*peer{s.bobPeer, s.member, s.a, s.b} }

// reached checks that message id was pushed once to each of want and to
// no other of the mesh's peers.
func (s *sessionMesh) reached(t *testing.T, id string, want ...*peer) {
	t.Helper()
	reachedOnly(t, id, s.peers(), want...)
}

// reachedOnly checks that message id was pushed once to each of want and
// to no other of peers: each one's next push is id if it is one of want,
// and then a marker DM to its key, sent after id was acknowledged (by the
// first of peers, to which the second sends its marker).
func reachedOnly(t *testing.T, id string, peers []*peer, want ...*peer) {
	t.Helper()
	for _, p := range want {
		if got := p.c.push(); got["client_message_id"] != id {
			t.Fatalf("%s got %v, want %s", p.name, got, id)
		}
	}
	for _, p := range peers {
		marker := id + "/marker-for-" + p.tag
		from := peers[0]
		if p == from {
			from = peers[1]
		}
		from.sendTo(t, marker, p.key)
		if got := p.c.push(); got["client_message_id"] != marker {
			t.Fatalf("%s got %v, want only the marker (%s reached it, or reached it twice)", p.name, got, id)
		}
	}
}

// sendTo sends a message from p and waits for its 201.
func (p *peer) sendTo(t *testing.T, id, target string) {
	t.Helper()
	p.c.send(sendFrame(id, target, "hello"))
	if ack := p.c.next("ack"); ack["code"] != float64(201) {
		t.Fatalf("%s sending %s to %s: %v", p.name, id, target, ack)
	}
}

// TestSessionDM: a DM to a session key reaches that session only — not the
// member's other session, not its member connection — and, while the
// session is away, waits for its reconnect.
func TestSessionDM(t *testing.T) {
	backendsTimed(t, testLease, sessionGrace, func(t *testing.T, e *env) {
		s := newSessionMesh(e)
		s.bobPeer.sendTo(t, "dm-1", s.a.key)
		s.reached(t, "dm-1", s.a)

		s.a.c.ws.Close()
		s.bobPeer.sendTo(t, "dm-2", s.a.key)
		s.a.c = e.connectWith(s.helloA()) // the markers go to it
		// A push of dm-2 to the new connection may be repeated when the old
		// connection's close frees the keys' leases after it (the design:
		// the receiver dedupes); it reaches A and no one else.
		if got := s.a.c.push(); got["client_message_id"] != "dm-2" {
			t.Fatalf("session A got %v, want dm-2", got)
		}
		s.member.sendTo(t, "dm-2/marker-for-A", s.a.key)
		for {
			got := s.a.c.push()["client_message_id"]
			if got == "dm-2/marker-for-A" {
				break
			}
			if got != "dm-2" {
				t.Fatalf("session A got %v, want dm-2 again or the marker", got)
			}
		}
		reachedOnly(t, "dm-2", []*peer{s.bobPeer, s.member, s.b})
	})
}

// TestSessionBroadcastAndTopic: `*` and `#<id>` (both members and both
// sessions joined: a session's topics are its own, TestTopicPerSession)
// from a session reach the member's other session, its member connection
// and the other members, once each, and not the sending session; from the
// member connection they reach its sessions.
func TestSessionBroadcastAndTopic(t *testing.T) {
	backendsTimed(t, testLease, sessionGrace, func(t *testing.T, e *env) {
		s := newSessionMesh(e)
		topic := "#" + createTopic(t, s.member.c, "builds")
		for _, p := range []*peer{s.bobPeer, s.a, s.b} {
			joinTopic(t, p.c, topic[1:])
		}
		for _, c := range []struct {
			id, target string
			from       *peer
			want       []*peer
		}{
			{"broadcast-from-A", "*", s.a, []*peer{s.member, s.b, s.bobPeer}},
			{"all-from-A", "@all", s.a, []*peer{s.member, s.b, s.bobPeer}},
			{"topic-from-A", topic, s.a, []*peer{s.member, s.b, s.bobPeer}},
			{"broadcast-from-member", "*", s.member, []*peer{s.a, s.b, s.bobPeer}},
			{"topic-from-bob", topic, s.bobPeer, []*peer{s.member, s.a, s.b}},
		} {
			c.from.sendTo(t, c.id, c.target)
			s.reached(t, c.id, c.want...)
		}
	})
}

// TestSessionGroup: @group reaches the live connections claiming it, by
// their own keys: a session of the sender's own member, and no one else.
func TestSessionGroup(t *testing.T) {
	backendsTimed(t, testLease, sessionGrace, func(t *testing.T, e *env) {
		s := newSessionMesh(e)
		s.a.sendTo(t, "group-from-A", "@reviewers")
		s.reached(t, "group-from-A", s.b)
		s.bobPeer.sendTo(t, "group-from-bob", "@reviewers")
		s.reached(t, "group-from-bob", s.b)
	})
}

// TestSessionStatus: set_status and set_summary from a session change its
// own peer entry, not its sibling's, its member's or the stored member; a
// session's displayName from its session_hello names its entry.
func TestSessionStatus(t *testing.T) {
	backendsTimed(t, testLease, sessionGrace, func(t *testing.T, e *env) {
		s := newSessionMesh(e)
		s.a.c.send(map[string]any{"type": "set_status", "status": "working"})
		s.a.c.send(map[string]any{"type": "set_summary", "summary": "refactoring the hub"})
		s.a.c.send(map[string]any{"type": "list_peers", "_reqId": "sync"}) // the hub has the status once this answers
		s.a.c.next("peers_list")
		s.bobPeer.c.send(map[string]any{"type": "list_peers", "_reqId": "peers"})
		entries := map[string]map[string]any{}
		for _, p := range s.bobPeer.c.next("peers_list")["peers"].([]any) {
			entry := p.(map[string]any)
			entries[entry["pubkey"].(string)] = entry
		}
		for _, c := range []struct {
			p                      *peer
			status, summary, named string
		}{
			{s.a, "working", "refactoring the hub", "alice (A)"},
			{s.b, "idle", "", "alice"},
			{s.member, "idle", "", "alice"},
		} {
			got := entries[c.p.key]
			if got == nil || got["status"] != c.status || got["summary"] != c.summary || got["displayName"] != c.named {
				t.Errorf("%s's entry %v, want status %q, summary %q, name %q", c.p.name, got, c.status, c.summary, c.named)
			}
		}
		m, err := e.store.MemberByPubkey(t.Context(), e.mesh.ID, s.alice.id.PublicKeyHex())
		if err != nil || m.Status != broker.StatusIdle || m.Summary != "" {
			t.Fatalf("stored member %+v (%v), want idle with no summary", m, err)
		}

		// A's own status holds its next-priority pushes; B's (the
		// member's) does not.
		s.bobPeer.sendTo(t, "held", s.a.key)
		s.bobPeer.sendTo(t, "to-B", s.b.key)
		if p := s.b.c.push(); p["client_message_id"] != "to-B" {
			t.Fatalf("session B got %v", p)
		}
		urgent := sendFrame("urgent", s.a.key, "hello")
		urgent["priority"] = "now"
		s.bobPeer.c.send(urgent)
		s.bobPeer.c.next("ack")
		if p := s.a.c.push(); p["client_message_id"] != "urgent" {
			t.Fatalf("session A (working) got %v, want only the priority-now message", p)
		}
		s.a.c.send(map[string]any{"type": "set_status", "status": "idle"})
		if p := s.a.c.push(); p["client_message_id"] != "held" {
			t.Fatalf("session A (idle again) got %v, want the held message", p)
		}
	})
}

// TestLegacySessionHello: a hello carrying a sessionPubkey (the legacy
// CLI) receives for its session key and its member key, as before: DMs to
// either reach it, and its own broadcast does not come back to it.
func TestLegacySessionHello(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		carol, dave := e.member("carol"), e.member("dave")
		session := e.identity()
		hello := e.hello(carol, "legacy")
		hello["sessionPubkey"] = session.PublicKeyHex()
		legacy := &peer{name: "carol's legacy session", tag: "legacy", c: e.connectWith(hello), key: session.PublicKeyHex()}
		d := &peer{name: "dave", tag: "dave", c: e.connect(dave, "dave"), key: dave.id.PublicKeyHex()}
		peers := []*peer{d, legacy}
		for _, c := range []struct {
			id, target string
			from       *peer
			want       []*peer
		}{
			{"to-the-session-key", session.PublicKeyHex(), d, []*peer{legacy}},
			{"to-the-member-key", carol.id.PublicKeyHex(), d, []*peer{legacy}},
			{"broadcast-from-dave", "*", d, []*peer{legacy}},
			{"broadcast-from-legacy", "*", legacy, []*peer{d}},
		} {
			c.from.sendTo(t, c.id, c.target)
			reachedOnly(t, c.id, peers, c.want...)
		}
	})
}

// TestSessionKeyReplaced: a second connection holding a session key that
// is already connected (under another session id) closes the older one,
// so that the key is listed once.
func TestSessionKeyReplaced(t *testing.T) {
	backends(t, ratelimit.Options{}, func(t *testing.T, e *env) {
		alice := e.member("alice")
		key := e.identity()
		first := e.connectWith(e.sessionHello(alice, key, "launch-1"))
		second := e.connectWith(e.sessionHello(alice, key, "launch-2"))
		if code := first.closeCode(); code != 1000 {
			t.Fatalf("the older connection closed with %d, want 1000 (session_replaced)", code)
		}
		second.send(map[string]any{"type": "list_peers", "_reqId": "pl"})
		n := 0
		for _, p := range second.next("peers_list")["peers"].([]any) {
			if p.(map[string]any)["pubkey"] == key.PublicKeyHex() {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("the session key is listed %d times", n)
		}
	})
}

// TestClosedSessionNotListed: a session whose connection closed leaves the
// peer list at once (its messages still queue during the grace).
func TestClosedSessionNotListed(t *testing.T) {
	backendsTimed(t, 0, sessionGrace, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		key := e.identity()
		session := e.connectWith(e.sessionHello(alice, key, "launch-1"))
		watcher := e.connect(bob, "bob")
		listed := func() bool {
			watcher.send(map[string]any{"type": "list_peers", "_reqId": "pl"})
			for _, p := range watcher.next("peers_list")["peers"].([]any) {
				if p.(map[string]any)["pubkey"] == key.PublicKeyHex() {
					return true
				}
			}
			return false
		}
		if !listed() {
			t.Fatal("the connected session is not listed")
		}
		session.ws.Close()
		// The close reaches the hub through the connection's actor.
		wait.For(t, 10*time.Second, "the closed session no longer listed", func() bool { return !listed() })
	})
}

// TestSessionsAcrossReplicas: two replicas on one PostgreSQL database. A
// DM from a member connected to the first, and one from a session
// connected to the first, to a session connected to the second are
// accepted and pushed to that session once (the NOTIFY path), to no one
// else; so are `*`, `#<id>` and `@group` to every recipient they name,
// wherever it is connected; a DM to a key no one holds is refused,
// nothing stored. With
// member_directory the first lists the second's session (its own name,
// peerRole session). A DM to the session closed within its grace queues,
// and reaches it when it reconnects, here to the first.
func TestSessionsAcrossReplicas(t *testing.T) {
	url := brokertest.PostgresURL(t)
	first, second := twoReplicasLeasing(t, url, "replicas", time.Hour)
	mesh := first.mesh
	alice, bob := first.member("alice"), first.member("bob")
	keyA, keyB := first.identity(), first.identity()
	helloB := func() map[string]any {
		h := first.sessionHello(bob, keyB, "bob-build")
		h["displayName"], h["groups"] = "bob (build)", []map[string]any{{"name": "reviewers"}}
		return h
	}
	a := &peer{name: "alice on the first", tag: "alice", c: first.connect(alice, "alice"), key: alice.id.PublicKeyHex()}
	sA := &peer{name: "alice's session on the first", tag: "sA", c: first.connectWith(first.sessionHello(alice, keyA, "alice-a")),
		key: keyA.PublicKeyHex()}
	bobPeer := &peer{name: "bob on the second", tag: "bob", c: second.connect(bob, "bob"), key: bob.id.PublicKeyHex()}
	sB := &peer{name: "bob's session on the second", tag: "sB", c: second.connectWith(helloB()), key: keyB.PublicKeyHex()}
	peers := []*peer{a, sA, bobPeer, sB}

	topic := "#" + createTopic(t, a.c, "builds")
	for _, p := range []*peer{bobPeer, sA, sB} { // a session's topics are its own
		joinTopic(t, p.c, topic[1:])
	}
	for _, c := range []struct {
		id, target string
		from       *peer
		want       []*peer
	}{
		{"member-to-session", sB.key, a, []*peer{sB}},
		{"session-to-session", sB.key, sA, []*peer{sB}},
		{"broadcast", "*", sA, []*peer{a, bobPeer, sB}},
		{"topic", topic, a, []*peer{sA, bobPeer, sB}},
		{"group", "@reviewers", a, []*peer{sB}},
	} {
		c.from.sendTo(t, c.id, c.target)
		reachedOnly(t, c.id, peers, c.want...)
	}

	madeUp := fmt.Sprintf("%064x", 0xdecaf)
	sA.c.send(sendFrame("to-no-one", madeUp, "hello"))
	if ack := sA.c.next("ack"); ack["code"] != float64(404) || ack["error"] != "unknown_recipient" {
		t.Errorf("a DM to a made-up key: %v, want 404 unknown_recipient", ack)
	}
	if row, err := first.store.LookupDedupe(t.Context(), mesh.ID, sA.key, "to-no-one"); row != nil || err != nil {
		t.Errorf("the refused DM left a dedupe row %+v (%v)", row, err)
	}

	dir := first.connect(alice, "dir")
	dir.send(map[string]any{"type": "feature_negotiation_request", "optional": []string{FeatureMemberDirectory}})
	dir.next("feature_negotiation_response")
	dir.send(map[string]any{"type": "list_peers", "_reqId": "pl"})
	var listed []map[string]any
	for _, p := range dir.next("peers_list")["peers"].([]any) {
		if p.(map[string]any)["pubkey"] == sB.key {
			listed = append(listed, p.(map[string]any))
		}
	}
	if len(listed) != 1 || listed[0]["displayName"] != "bob (build)" || listed[0]["peerRole"] != "session" ||
		listed[0]["memberPubkey"] != bob.id.PublicKeyHex() || listed[0]["sessionId"] != "bob-build" {
		t.Errorf("the second's session in the first's directory: %v", listed)
	}

	sB.c.ws.Close()
	wait.For(t, 10*time.Second, "the session's close recorded", func() bool {
		list, err := first.store.Sessions(t.Context(), mesh.ID)
		return err == nil && !slices.ContainsFunc(list, func(s broker.Session) bool { return s.SessionPubkey == sB.key })
	})
	a.sendTo(t, "while-away", sB.key)
	sB.c = first.connectWith(helloB())
	if got := sB.c.push(); got["client_message_id"] != "while-away" {
		t.Fatalf("the session, back on the first, got %v, want the DM sent while it was away", got)
	}

	// Upstream's CLI: a hello with a sessionPubkey (no attestation) on the
	// second; a DM to its session key from the first reaches it.
	keyL := first.identity()
	helloL := second.hello(bob, "bob-legacy")
	helloL["sessionPubkey"] = keyL.PublicKeyHex()
	legacy := second.connectWith(helloL)
	a.sendTo(t, "to-a-legacy-session", keyL.PublicKeyHex())
	if got := legacy.push(); got["client_message_id"] != "to-a-legacy-session" {
		t.Fatalf("the legacy session on the second got %v, want the DM to its session key", got)
	}
	// A broadcast reaches it once, by its member key, as at its own replica;
	// and bob's member connection there too, though only one of the two
	// claims the row (the lease outlasts the test: no redelivery helps).
	a.sendTo(t, "to-everyone", "*")
	for _, c := range []struct {
		name string
		c    *client
	}{{"the legacy session", legacy}, {"bob's member connection beside it", bobPeer.c}} {
		if got := c.c.push(); got["client_message_id"] != "to-everyone" {
			t.Fatalf("%s got %v, want the broadcast", c.name, got)
		}
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM delivery_queue d JOIN message m ON m.id = d.message_id
		WHERE m.client_message_id = 'to-everyone' AND d.recipient_pubkey = $1`, keyL.PublicKeyHex()).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("the broadcast made %d delivery rows for the legacy session key (%v), want none: its member key's reaches it", rows, err)
	}
	a.sendTo(t, "after-everyone", keyL.PublicKeyHex())
	if got := legacy.push(); got["client_message_id"] != "after-everyone" {
		t.Fatalf("the legacy session got %v after the broadcast, want the next DM (the broadcast came twice?)", got)
	}
}

// TestSessionTakenAcrossReplicas: a session key that connects at a second
// replica while its old connection lingers at the first (a daemon that
// reconnected elsewhere before its old connection's end was seen) takes
// the session over: the first closes the old connection (1000,
// session_replaced) and lists the key once, where it now is; a DM to it
// sent at the first reaches the new connection, not the old.
func TestSessionTakenAcrossReplicas(t *testing.T) {
	first, second := twoReplicas(t, brokertest.PostgresURL(t), "takeover")
	alice, bob := first.member("alice"), first.member("bob")
	key := first.identity()
	old := first.connectWith(first.sessionHello(alice, key, "launch-1"))
	moved := second.connectWith(second.sessionHello(alice, key, "launch-2"))
	if code := old.closeCode(); code != 1000 {
		t.Fatalf("the old connection at the first closed with %d, want 1000 (session_replaced)", code)
	}

	b := &peer{name: "bob on the first", tag: "bob", c: first.connect(bob, "bob"), key: bob.id.PublicKeyHex()}
	b.sendTo(t, "after-the-move", key.PublicKeyHex())
	if got := moved.push(); got["client_message_id"] != "after-the-move" {
		t.Fatalf("the session at the second got %v, want the DM sent at the first", got)
	}

	b.c.send(map[string]any{"type": "feature_negotiation_request", "optional": []string{FeatureMemberDirectory}})
	b.c.next("feature_negotiation_response")
	b.c.send(map[string]any{"type": "list_peers", "_reqId": "pl"})
	var listed []any
	for _, p := range b.c.next("peers_list")["peers"].([]any) {
		if p.(map[string]any)["pubkey"] == key.PublicKeyHex() {
			listed = append(listed, p.(map[string]any)["sessionId"])
		}
	}
	if len(listed) != 1 || listed[0] != "launch-2" {
		t.Fatalf("the first lists the session key as %v, want once, as launch-2", listed)
	}
}

// TestSessionTakenOverUnnotified: the first replica's LISTEN connections
// go deaf (a proxy holds their traffic without a word), so it misses the
// notification of a session's takeover by a connection at the second; its
// old connection of the session is closed (session_replaced) at its next
// heartbeat instead, which finds the row held by the other. Before, it
// lived on, listed at the first, until its own pings failed — never, for a
// connection still alive. A swept row of a live connection is written
// again at its next heartbeat.
func TestSessionTakenOverUnnotified(t *testing.T) {
	url := brokertest.PostgresURL(t)
	proxy, viaProxy := brokertest.NewProxy(t, url)
	first := serveBrokerOpts(t, broker.Options{DatabaseURL: viaProxy}, Options{Limiter: ratelimit.NewMemory(noLimit),
		PresenceGrace: sessionGrace, DeliveryLease: testLease, RevocationCheck: testRevocationCheck,
		Limits: wsserver.Limits{PingInterval: 50 * time.Millisecond}})
	mesh, err := first.store.CreateMesh(t.Context(), broker.Mesh{Slug: "unnotified"})
	if err != nil {
		t.Fatal(err)
	}
	first.mesh = mesh
	second := serveBrokerTimed(t, broker.Options{DatabaseURL: url}, ratelimit.NewMemory(noLimit), testLease, sessionGrace)
	second.mesh = mesh
	alice, key := first.member("alice"), first.identity()
	old := first.connectWith(first.sessionHello(alice, key, "launch-1"))
	proxy.Cut(broker.DefaultListenName)
	second.connectWith(second.sessionHello(alice, key, "launch-2"))
	if code := old.closeCode(); code != 1000 {
		t.Fatalf("the old connection at the first closed with %d, want 1000 (session_replaced)", code)
	}
	if n := metric(t, first, "cm_broker_sessions_taken_over_total"); n != 1 {
		t.Errorf("the first counted %v takeovers, want 1", n)
	}

	// A row swept while its connection lives (its heartbeats could not be
	// written for the stale threshold) is written again at the next one, so
	// that other replicas accept DMs to the session again.
	other := first.identity()
	live := first.connectWith(first.sessionHello(alice, other, "launch-3"))
	if _, err := first.store.SweepSessions(t.Context(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the swept row written again", func() bool {
		live.send(map[string]any{"type": "list_peers"}) // a read answers the pings that beat
		live.next("peers_list")
		list, err := second.store.Sessions(t.Context(), mesh.ID)
		return err == nil && slices.ContainsFunc(list, func(s broker.Session) bool { return s.SessionPubkey == other.PublicKeyHex() })
	})
}

// twoReplicas serves two brokers on the PostgreSQL database at url, both
// with the mesh slug made by the first.
func twoReplicas(t *testing.T, url, slug string) (first, second *env) {
	t.Helper()
	return twoReplicasLeasing(t, url, slug, testLease)
}

// twoReplicasLeasing is twoReplicas with a delivery lease of its own.
func twoReplicasLeasing(t *testing.T, url, slug string, lease time.Duration) (first, second *env) {
	t.Helper()
	first = serveBrokerTimed(t, broker.Options{DatabaseURL: url}, ratelimit.NewMemory(noLimit), lease, sessionGrace)
	mesh, err := first.store.CreateMesh(t.Context(), broker.Mesh{Slug: slug})
	if err != nil {
		t.Fatal(err)
	}
	first.mesh = mesh
	second = serveBrokerTimed(t, broker.Options{DatabaseURL: url}, ratelimit.NewMemory(noLimit), lease, sessionGrace)
	second.mesh = mesh
	return first, second
}
