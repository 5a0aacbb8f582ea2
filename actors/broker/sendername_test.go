package broker

import (
	"testing"
	"time"
)

// TestSenderNameStored: a session's messages are named by the session's
// display name wherever they are read — a DM and a topic message drained
// to a recipient that connects after the session has gone (its session
// row swept, on PostgreSQL; never written, on SQLite), and the topic's
// history.
func TestSenderNameStored(t *testing.T) {
	backendsTimed(t, testLease, sessionGrace, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		member := e.connect(alice, "control")
		topic := createTopic(t, member, "builds")
		b := e.connect(bob, "b")
		joinTopic(t, b, topic)
		b.ws.Close()

		hello := e.sessionHello(alice, e.identity(), "session-a")
		hello["displayName"] = "alice (A)"
		a := &peer{name: "session A", c: e.connectWith(hello)}
		a.sendTo(t, "dm-1", bob.id.PublicKeyHex())
		a.sendTo(t, "topic-1", "#"+topic)
		a.c.ws.Close()
		if _, err := e.store.SweepSessions(t.Context(), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}

		again := e.connect(bob, "b-again")
		got := map[any]any{}
		for range 2 {
			p := again.push()
			got[p["client_message_id"]] = p["senderName"]
		}
		if got["dm-1"] != "alice (A)" || got["topic-1"] != "alice (A)" {
			t.Errorf("drained pushes named %v, want alice (A) for dm-1 and topic-1", got)
		}
		again.send(map[string]any{"type": "topic_history", "topic": topic, "_reqId": "h"})
		msgs, _ := again.next("topic_history_response")["messages"].([]any)
		if len(msgs) != 1 || msgs[0].(map[string]any)["senderName"] != "alice (A)" {
			t.Errorf("topic history %v, want topic-1 from alice (A)", msgs)
		}
	})
}
