package broker

import (
	"context"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// TestRedeliveryAfterLease: a push that is not acknowledged is pushed again
// when its lease runs out, on a timer, without a reconnect; once acked it
// is not pushed again.
func TestRedeliveryAfterLease(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		a.send(sendFrame("l-1", bob.id.PublicKeyHex(), "hello"))
		a.next("ack")
		first := b.unacked()
		again := b.unacked() // no client_ack: the lease runs out
		if again["client_message_id"] != "l-1" || again["messageId"] != first["messageId"] {
			t.Fatalf("redelivery %v, want l-1 again", again)
		}
		b.send(map[string]any{"type": "client_ack", "clientMessageId": "l-1", "brokerMessageId": again["messageId"]})
		a.send(sendFrame("l-2", bob.id.PublicKeyHex(), "hello"))
		a.next("ack")
		if next := b.push(); next["client_message_id"] != "l-2" {
			t.Fatalf("after the ack: %v, want l-2", next)
		}
		a.send(sendFrame("l-3", bob.id.PublicKeyHex(), "hello"))
		a.next("ack")
		if next := b.push(); next["client_message_id"] != "l-3" {
			t.Fatalf("after acking l-2: %v, want l-3", next)
		}
	})
}

// TestLeaseReleasedOnClose: a push the receiver did not ack before its
// connection closed is pushed again as soon as it reconnects, not when the
// lease runs out: the lease here is an hour. Also with the receiver's other
// connection still live: it gets the push at the close.
func TestLeaseReleasedOnClose(t *testing.T) {
	hourLease(t, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		a.send(sendFrame("r-1", bob.id.PublicKeyHex(), "hello"))
		a.next("ack")
		first := b.unacked()
		b.ws.Close() // no client_ack
		b2 := e.connect(bob, "b")
		if again := b2.push(); again["client_message_id"] != "r-1" || again["messageId"] != first["messageId"] {
			t.Fatalf("after the reconnect bob got %v, want r-1 again", again)
		}

		// Two connections of bob (two sessions): the one that closes
		// without acking hands its push to the other.
		b3 := e.connect(bob, "b-other")
		a.send(sendFrame("r-2", bob.id.PublicKeyHex(), "hello"))
		a.next("ack")
		// (b3's own drain at its hello may bring r-1 too, if b2's ack of
		// it was not committed yet: passed over.)
		unackedID(b3, "r-2")
		unackedID(b2, "r-2")
		b2.ws.Close()
		unackedID(b3, "r-2")
		t.Log("unacked pushes went out again at the close, with a lease of an hour")
	})
}

// hourLease runs fn against a broker on each backend whose delivery lease
// is an hour, so that only a release hands a push out again in time.
func hourLease(t *testing.T, fn func(t *testing.T, e *env)) {
	backendsTimed(t, time.Hour, testGrace, fn)
}

// TestUnpushedLeaseReleased: a recipient resolved as online whose push
// then goes to no connection (its connection closed in between; here, a DM
// to oneself from one's only connection, which a fanout never pushes back
// to) has its lease released at once and the row drained, not held for the
// lease (an hour here).
func TestUnpushedLeaseReleased(t *testing.T) {
	hourLease(t, func(t *testing.T, e *env) {
		alice := e.member("alice")
		a := e.connect(alice, "a")
		a.send(sendFrame("self-1", alice.id.PublicKeyHex(), "a note to myself"))
		a.next("ack")
		if p := a.push(); p["client_message_id"] != "self-1" {
			t.Fatalf("alice got %v, want self-1", p)
		}
	})
}

// TestConnectFreesStaleLeases: a row leased to a connection that is gone
// without its close freeing the lease (its broker process died: a replica's
// leases outlive it) goes to the recipient's next connection at its hello,
// not when the lease (an hour here) runs out.
func TestConnectFreesStaleLeases(t *testing.T) {
	hourLease(t, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a := e.connect(alice, "a")
		a.send(sendFrame("stale-1", bob.id.PublicKeyHex(), "to bob, offline"))
		a.next("ack")
		// The claim of a connection that died with its broker.
		ds, err := e.store.ClaimDeliveries(context.Background(), broker.Claim{MeshID: e.mesh.ID,
			RecipientPubkeys: []string{bob.id.PublicKeyHex()}, Lease: time.Hour, Limit: 10})
		if err != nil || len(ds) != 1 {
			t.Fatalf("claim: %v, %d rows", err, len(ds))
		}
		b := e.connect(bob, "b")
		if p := b.push(); p["client_message_id"] != "stale-1" {
			t.Fatalf("bob got %v, want stale-1", p)
		}
	})
}
