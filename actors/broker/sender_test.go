package broker

import (
	"maps"
	"slices"
	"testing"
)

// TestIDPerSender: a client_message_id belongs to its sender (issue 16,
// defect 1). Two members of one mesh — two agents of one daemon, say —
// send one id to a third: both are accepted (201, two broker ids), both
// are pushed, each retry is a duplicate of its own message and each
// changed request a conflict.
func TestIDPerSender(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, carol, bob := e.member("alice"), e.member("carol"), e.member("bob")
		senders := []*peer{
			{name: "alice", tag: "alice", c: e.connect(alice, "a"), key: alice.id.PublicKeyHex()},
			{name: "carol", tag: "carol", c: e.connect(carol, "c"), key: carol.id.PublicKeyHex()},
		}
		to := &peer{name: "bob", tag: "bob", c: e.connect(bob, "b"), key: bob.id.PublicKeyHex()}
		sameIDFrom(t, senders, to)
	})
}

// TestIDPerSessionSender: the same for the sessions of one member, whose
// sends carry their session keys, and for its member connection: three
// senders, one id, three messages.
func TestIDPerSessionSender(t *testing.T) {
	backendsTimed(t, testLease, sessionGrace, func(t *testing.T, e *env) {
		s := newSessionMesh(e)
		sameIDFrom(t, []*peer{s.a, s.b, s.member}, s.bobPeer)
	})
}

// sameIDFrom sends the id "same" from each of senders to to: each send is
// a 201 with a broker id of its own, to gets one push per sender (the push
// carrying that sender's key), each sender's retry is a 200 duplicate of
// its own message, its changed request a 409, and no retry is pushed.
func sameIDFrom(t *testing.T, senders []*peer, to *peer) {
	t.Helper()
	created := map[string]string{} // sender key → broker id
	for _, p := range senders {
		p.c.send(sendFrame("same", to.key, "hello"))
		ack := p.c.next("ack")
		if ack["code"] != float64(201) || ack["duplicate"] == true {
			t.Fatalf("%s's send of id same: %v, want 201", p.name, ack)
		}
		id, _ := ack["broker_message_id"].(string)
		if slices.Contains(slices.Collect(maps.Values(created)), id) {
			t.Fatalf("%s's send of id same was taken for another sender's (%s)", p.name, id)
		}
		created[p.key] = id
	}
	pushed := map[string]string{}
	for range senders {
		push := to.c.push()
		if push["client_message_id"] != "same" {
			t.Fatalf("%s got %v, want a push of id same", to.name, push)
		}
		sender, _ := push["senderPubkey"].(string)
		if _, twice := pushed[sender]; twice {
			t.Fatalf("%s got the id same from %s twice", to.name, sender)
		}
		pushed[sender], _ = push["messageId"].(string)
	}
	for _, p := range senders {
		if pushed[p.key] != created[p.key] {
			t.Errorf("%s's message %s: pushed to %s as %q", p.name, created[p.key], to.name, pushed[p.key])
		}
		p.c.send(sendFrame("same", to.key, "hello"))
		if dup := p.c.next("ack"); dup["code"] != float64(200) || dup["duplicate"] != true || dup["broker_message_id"] != created[p.key] {
			t.Errorf("%s's retry: %v, want 200 duplicate of %s", p.name, dup, created[p.key])
		}
		p.c.send(sendFrame("same", to.key, "other"))
		if conflict := p.c.next("ack"); conflict["code"] != float64(409) || conflict["error"] != "idempotency_key_reused" {
			t.Errorf("%s's changed request: %v, want 409", p.name, conflict)
		}
	}
	// A marker proves that no retry was pushed in between.
	senders[0].sendTo(t, "same/marker", to.key)
	if next := to.c.push(); next["client_message_id"] != "same/marker" {
		t.Fatalf("%s got %v after the retries, want the marker", to.name, next)
	}
}
