package broker

import (
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestDrainHeld: a session whose status is working holds its next and low
// DMs (nothing is pushed); drain_held pushes them at once, before its
// answer, which counts them, and the status still holds what comes after.
// A second drain_held finds nothing left.
func TestDrainHeld(t *testing.T) {
	backendsTimed(t, testLease, sessionGrace, func(t *testing.T, e *env) {
		s := newSessionMesh(e)
		s.a.c.send(map[string]any{"type": messages.TypeFeatureNegotiationRequest, "require": []string{}, "optional": []string{}})
		held, _ := s.a.c.next(messages.TypeFeatureNegotiationResponse)["supported"].(map[string]any)[FeatureHeld].(map[string]any)
		if params, _ := held["params"].(map[string]any); params["version"] != float64(1) {
			t.Fatalf("the broker advertises held as %v, want version 1", held)
		}
		s.a.c.send(map[string]any{"type": "set_status", "status": "working"})
		s.a.c.send(map[string]any{"type": "list_peers", "_reqId": "sync"}) // frames run in order: working is in force
		s.a.c.next("peers_list")
		s.bobPeer.sendTo(t, "next-1", s.a.key)
		low := sendFrame("low-1", s.a.key, "hello")
		low["priority"] = "low"
		s.bobPeer.c.send(low)
		s.bobPeer.c.next("ack")

		s.a.c.send(map[string]any{"type": messages.TypeDrainHeld, "_reqId": "hd-1"})
		answer := s.a.c.next(messages.TypeHeldDrained)
		if answer["_reqId"] != "hd-1" || answer["pushed"] != float64(2) || answer["more"] != nil {
			t.Fatalf("held_drained = %v, want 2 pushed for hd-1", answer)
		}
		var before []any // the pushes read while waiting for the answer: they came first
		for _, f := range s.a.c.seen {
			if f["type"] == "push" && f["subtype"] != "system" {
				before = append(before, f["client_message_id"])
			}
		}
		if len(before) != 2 || before[0] != "next-1" || before[1] != "low-1" {
			t.Fatalf("pushed before held_drained: %v, want next-1 and low-1 in order", before)
		}
		s.a.c.push()
		s.a.c.push()

		s.bobPeer.sendTo(t, "next-2", s.a.key) // working still holds it
		s.a.c.send(map[string]any{"type": messages.TypeDrainHeld, "_reqId": "hd-2"})
		if p := s.a.c.push(); p["client_message_id"] != "next-2" {
			t.Fatalf("the second drain pushed %v, want next-2", p)
		}
		if answer := s.a.c.next(messages.TypeHeldDrained); answer["_reqId"] != "hd-2" || answer["pushed"] != float64(1) {
			t.Fatalf("held_drained = %v, want 1 pushed for hd-2", answer)
		}
		s.a.c.send(map[string]any{"type": messages.TypeDrainHeld, "_reqId": "hd-3"})
		if answer := s.a.c.next(messages.TypeHeldDrained); answer["pushed"] != float64(0) {
			t.Fatalf("a drain with nothing held answered %v", answer)
		}
	})
}
