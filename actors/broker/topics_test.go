package broker

import (
	"context"
	"testing"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// createTopic creates a topic through c and returns its id.
func createTopic(t *testing.T, c *client, name string) string {
	t.Helper()
	c.send(map[string]any{"type": "topic_create", "name": name, "description": "about " + name, "_reqId": "tc-" + name})
	f := c.next("topic_created")
	topic, _ := f["topic"].(map[string]any)
	if f["_reqId"] != "tc-"+name || f["created"] != true || topic["name"] != name || topic["visibility"] != "public" {
		t.Fatalf("topic_created = %v", f)
	}
	return topic["id"].(string)
}

// joinTopic joins c's member to the topic and waits until it is applied
// (frames run in order: the members' answer comes after the join).
func joinTopic(t *testing.T, c *client, topic string) {
	t.Helper()
	c.send(map[string]any{"type": "topic_join", "topic": topic})
	c.send(map[string]any{"type": "topic_members", "topic": topic, "_reqId": "joined"})
	c.next("topic_members_response")
}

// TestTopicFrames: the §2.7 requests and answers, _reqId echoed, a topic
// named by id or name, topic_not_found for neither.
func TestTopicFrames(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		id := createTopic(t, a, "general")
		if len(id) != broker.TopicIDLength {
			t.Errorf("topic id %q", id)
		}

		b.send(map[string]any{"type": "topic_create", "name": "general", "_reqId": "again"})
		if f := b.next("topic_created"); f["created"] != false || f["topic"].(map[string]any)["id"] != id {
			t.Errorf("second create of the name = %v", f)
		}
		b.send(map[string]any{"type": "topic_leave", "topic": "general"})
		b.send(map[string]any{"type": "topic_join", "topic": id, "role": "observer"})
		b.send(map[string]any{"type": "topic_mark_read", "topic": "general"})
		b.send(map[string]any{"type": "topic_members", "topic": "general", "_reqId": "tm-1"})
		f := b.next("topic_members_response")
		members, _ := f["members"].([]any)
		if f["_reqId"] != "tm-1" || f["topic"] != "general" || len(members) != 2 {
			t.Fatalf("topic_members_response = %v", f)
		}
		roles := map[string]any{}
		for _, m := range members {
			m := m.(map[string]any)
			roles[m["displayName"].(string)] = m["role"]
			if m["displayName"] == "bob" && m["lastReadAt"] == nil {
				t.Errorf("bob's lastReadAt not set by topic_mark_read: %v", m)
			}
		}
		if roles["alice"] != "lead" || roles["bob"] != "observer" {
			t.Errorf("roles = %v", roles)
		}

		a.send(map[string]any{"type": "topic_list", "_reqId": "tl-1"})
		list := a.next("topic_list_response")
		topics, _ := list["topics"].([]any)
		if list["_reqId"] != "tl-1" || len(topics) != 1 {
			t.Fatalf("topic_list_response = %v", list)
		}
		if got := topics[0].(map[string]any); got["id"] != id || got["memberCount"] != float64(2) ||
			got["description"] != "about general" || got["createdAt"] == "" {
			t.Errorf("listed topic = %v", got)
		}

		for _, req := range []map[string]any{
			{"type": "topic_join", "topic": "nope", "_reqId": "r1"},
			{"type": "topic_leave", "topic": "nope", "_reqId": "r1"},
			{"type": "topic_members", "topic": "nope", "_reqId": "r1"},
			{"type": "topic_history", "topic": "nope", "_reqId": "r1"},
			{"type": "topic_mark_read", "topic": "nope", "_reqId": "r1"},
		} {
			a.send(req)
			if f := a.next("error"); f["code"] != "topic_not_found" || f["_reqId"] != "r1" || f["id"] != "r1" {
				t.Errorf("%s of an unknown topic: %v", req["type"], f)
			}
		}
		a.send(map[string]any{"type": "topic_create", "name": "two words", "_reqId": "bad"})
		if f := a.next("error"); f["code"] != "invalid_args" || f["_reqId"] != "bad" {
			t.Errorf("topic_create with a bad name: %v", f)
		}
		a.send(map[string]any{"type": "topic_join", "topic": id, "role": "owner", "_reqId": "bad-role"})
		if f := a.next("error"); f["code"] != "invalid_args" || f["_reqId"] != "bad-role" {
			t.Errorf("topic_join with a bad role: %v", f)
		}
	})
}

// TestTopicSendReachesJoinedMembers: a `#<id>` send is pushed live to
// each connection of each joined member once — a member's daemon
// connection, and a session of its that joined too — not to a session
// that did not join (its member's membership is not its own), nor to
// members who did not join, nor back to the sender; a joined member
// offline gets it when it connects; the message is in the topic's history.
func TestTopicSendReachesJoinedMembers(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob, carol, dave := e.member("alice"), e.member("bob"), e.member("carol"), e.member("dave")
		a, b, c := e.connect(alice, "a"), e.connect(bob, "b"), e.connect(carol, "c")
		bs := e.connectWith(e.sessionHello(bob, e.identity(), "bob-launch"))
		bj := e.connectWith(e.sessionHello(bob, e.identity(), "bob-joined"))
		id := createTopic(t, a, "dev")
		daveFirst := e.connect(dave, "d-first")
		joinTopic(t, b, "dev")
		joinTopic(t, bj, "dev")
		joinTopic(t, daveFirst, "dev")
		daveFirst.ws.Close() // dave is offline: his delivery waits for his next connection

		a.send(sendFrame("t-1", "#"+id, "aGVsbG8gZGV2"))
		ack := a.next("ack")
		if ack["code"] != float64(201) || ack["queued"] != true {
			t.Fatalf("topic send ack = %v", ack)
		}
		// A broadcast after it marks the end: whoever gets the topic push
		// gets it before the broadcast, and nothing else in between.
		a.send(sendFrame("mark", "*", "bWFyaw=="))
		a.next("ack")
		for name, conn := range map[string]*client{"bob": b, "bob's joined session": bj} {
			p := conn.push()
			if p["client_message_id"] != "t-1" || p["topic"] != id || p["targetSpec"] != "#"+id || p["messageId"] != ack["messageId"] {
				t.Errorf("%s: push = %v", name, p)
			}
			if p := conn.push(); p["client_message_id"] != "mark" {
				t.Errorf("%s: after the topic push came %v, want the marker (one push each)", name, p)
			}
		}
		for name, conn := range map[string]*client{"carol, not a member,": c, "bob's session, not joined,": bs} {
			if p := conn.push(); p["client_message_id"] != "mark" {
				t.Errorf("%s got %v before the marker", name, p)
			}
		}
		if p := e.connect(dave, "d-later").push(); p["client_message_id"] != "t-1" {
			t.Errorf("dave, joined but offline, got %v first on connecting", p)
		}

		a.send(map[string]any{"type": "topic_history", "topic": id, "limit": 10, "_reqId": "h"})
		h := a.next("topic_history_response")
		msgs, _ := h["messages"].([]any)
		if h["_reqId"] != "h" || len(msgs) != 1 {
			t.Fatalf("topic_history_response = %v", h)
		}
		if m := msgs[0].(map[string]any); m["id"] != ack["messageId"] || m["senderPubkey"] != alice.id.PublicKeyHex() ||
			m["senderName"] != "alice" || m["ciphertext"] != "aGVsbG8gZGV2" {
			t.Errorf("history message = %v", m)
		}
	})
}

// topicMembers asks c for the topic's members, as displayName → role.
func topicMembers(t *testing.T, c *client, topic string) map[string]any {
	t.Helper()
	c.send(map[string]any{"type": "topic_members", "topic": topic, "_reqId": "members"})
	members, _ := c.next("topic_members_response")["members"].([]any)
	roles := map[string]any{}
	for _, m := range members {
		m := m.(map[string]any)
		roles[m["displayName"].(string)] = m["role"]
	}
	return roles
}

// TestTopicPerSession: two sessions of one member; one joins #x and only
// it receives #x — not its sibling, not its member's daemon connection;
// leaving is the leaver's alone; a session that creates a topic leads it
// as itself; topic_members lists sessions by their names. An upstream
// hello naming a sessionPubkey joins as its member, as upstream's does:
// its member's other connection receives too.
func TestTopicPerSession(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob, carol := e.member("alice"), e.member("bob"), e.member("carol")
		a, b, c := e.connect(alice, "a"), e.connect(bob, "b"), e.connect(carol, "c")
		session := func(name string) *client {
			h := e.sessionHello(alice, e.identity(), name)
			h["displayName"] = name
			return e.connectWith(h)
		}
		s1, s2 := session("alice-build"), session("alice-docs")
		legacy := e.hello(carol, "c-cli")
		legacy["sessionPubkey"] = e.identity().PublicKeyHex()
		cl := e.connectWith(legacy)
		x := createTopic(t, b, "x")
		joinTopic(t, s1, "x")
		joinTopic(t, cl, "x")
		if got := topicMembers(t, s2, "x"); len(got) != 3 || got["bob"] != "lead" || got["alice-build"] != "member" ||
			got["carol"] != "member" {
			t.Fatalf("members of #x = %v; want bob, alice-build and carol (no alice, no alice-docs)", got)
		}

		// expect has each connection's next pushes be these ids, in order.
		expect := func(want map[*client][]string) {
			t.Helper()
			for conn, ids := range want {
				for _, id := range ids {
					if p := conn.push(); p["client_message_id"] != id {
						t.Errorf("push %v, want %s (of %v)", p["client_message_id"], id, ids)
					}
				}
			}
		}
		b.send(sendFrame("one", "#"+x, "b25l"))
		b.next("ack")
		b.send(sendFrame("mark-1", "*", "bWFyaw=="))
		b.next("ack")
		expect(map[*client][]string{s1: {"one", "mark-1"}, s2: {"mark-1"}, a: {"mark-1"}, cl: {"one", "mark-1"},
			c: {"one", "mark-1"}})

		joinTopic(t, s2, x)
		s1.send(map[string]any{"type": "topic_leave", "topic": "x"})
		if got := topicMembers(t, s1, "x"); len(got) != 3 || got["alice-docs"] != "member" || got["alice-build"] != nil {
			t.Fatalf("members after alice-build left = %v", got)
		}
		b.send(sendFrame("two", "#"+x, "dHdv"))
		b.next("ack")
		b.send(sendFrame("mark-2", "*", "bWFyaw=="))
		b.next("ack")
		expect(map[*client][]string{s1: {"mark-2"}, s2: {"two", "mark-2"}, a: {"mark-2"}})

		y := createTopic(t, s1, "y")
		if got := topicMembers(t, a, y); len(got) != 1 || got["alice-build"] != "lead" {
			t.Errorf("members of #y, created by alice-build = %v", got)
		}
	})
}

// TestTopicSendUnknownRefused: a `#` target that is no topic id of the
// mesh — a topic's name, an id of nothing — is refused in the ack
// (queued:false, 404 topic_not_found), nothing is stored, and the id stays
// free for the sender's next request.
func TestTopicSendUnknownRefused(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice := e.member("alice")
		a := e.connect(alice, "a")
		id := createTopic(t, a, "general")
		for _, target := range []string{"#general", "#0123456789abcdefghijABCDEFGHIJ99"} {
			a.send(sendFrame("u-1", target, "aGk="))
			ack := a.next("ack")
			if ack["queued"] != false || ack["code"] != float64(404) || ack["error"] != "topic_not_found" || ack["messageId"] != "" {
				t.Errorf("send to %s: ack %v, want queued:false 404 topic_not_found", target, ack)
			}
		}
		row, err := e.store.LookupDedupe(context.Background(), e.mesh.ID, alice.id.PublicKeyHex(), "u-1")
		if err != nil || row != nil {
			t.Fatalf("a refused send left a dedupe row: %+v, %v", row, err)
		}
		a.send(sendFrame("u-1", "#"+id, "aGk="))
		if ack := a.next("ack"); ack["code"] != float64(201) {
			t.Errorf("the id after the refusals, to the topic's id: %v", ack)
		}
	})
}

// TestTopicAcrossReplicas: a member, and a session, joined to a topic and
// connected to another replica get the topic's messages live, as other
// sends fan out; a session there that did not join does not.
func TestTopicAcrossReplicas(t *testing.T) {
	url := brokertest.PostgresURL(t)
	first := startBroker(t, broker.Options{DatabaseURL: url}, noLimit)
	second := attachBroker(t, first, broker.Options{DatabaseURL: url})
	alice, bob := first.member("alice"), first.member("bob")
	a, b := first.connect(alice, "a"), second.connect(bob, "b")
	bj := second.connectWith(second.sessionHello(bob, second.identity(), "bob-joined"))
	bs := second.connectWith(second.sessionHello(bob, second.identity(), "bob-other"))
	id := createTopic(t, a, "ops")
	joinTopic(t, b, id) // on the other replica
	joinTopic(t, bj, id)
	a.send(sendFrame("r-1", "#"+id, "aGk="))
	if ack := a.next("ack"); ack["code"] != float64(201) {
		t.Fatalf("ack %v", ack)
	}
	a.send(sendFrame("mark", "*", "bWFyaw=="))
	a.next("ack")
	for name, conn := range map[string]*client{"bob": b, "bob's joined session": bj} {
		if p := conn.push(); p["client_message_id"] != "r-1" || p["topic"] != id {
			t.Errorf("%s: push on the other replica: %v", name, p)
		}
	}
	if p := bs.push(); p["client_message_id"] != "mark" {
		t.Errorf("bob's session, not joined, got %v before the marker", p)
	}
}
