package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// namesPeers waits until alice's GET /v1/peers lists every name in want.
func namesPeers(t *testing.T, c *http.Client, want ...string) {
	t.Helper()
	var seen []string
	if err := wait.Until(e2eConnectDeadline, "peers "+strings.Join(want, ", "), func() bool {
		var body struct {
			Peers []messages.Peer `json:"peers"`
		}
		if st, _, err := getJSON(c, "http://localhost/v1/peers?mesh=demo", &body); err != nil || st != http.StatusOK {
			return false
		}
		seen = seen[:0]
		for _, p := range body.Peers {
			seen = append(seen, p.DisplayName)
		}
		for _, name := range want {
			if !slices.Contains(seen, name) {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("%v; seen %s", err, strings.Join(seen, ", "))
	}
}

// sendJSON posts a /v1/send body made of fields.
func sendJSON(t *testing.T, c *http.Client, fields map[string]string) *response {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return post(t, c, b)
}

// TestSendByDisplayName: POST /v1/send takes a peer's display name, as
// upstream's daemon does, resolved against the mesh's peer list with the
// look-alike folding of the names' uniqueness: a name one peer has is
// delivered to that peer's key; a name two keys have is a 409 listing
// both; a name nobody has is a 404; a refusal stores nothing and leaves
// the id free; and the fingerprint covers the `to` as typed. The peers are
// agent sessions of bob's daemon (a session may take any name no other
// member holds, so two of them can share one).
func TestSendByDisplayName(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	helper1 := registerSession(t, bob.env.socket(), "demo", "s-helper-1", "helper")
	helper2 := registerSession(t, bob.env.socket(), "demo", "s-helper-2", "hеlper") // a Cyrillic е
	reviewer := registerSession(t, bob.env.socket(), "demo", "s-reviewer", "reviewer")
	namesPeers(t, alice.c, "helper", "hеlper", "reviewer")

	r := sendJSON(t, alice.c, map[string]string{"to": "HELPER", "message": "which one?", "client_message_id": "amb-1"})
	body := r.json(t)
	var candidates []string
	for _, c := range body["candidates"].([]any) {
		candidates = append(candidates, c.(map[string]any)["pubkey"].(string))
	}
	slices.Sort(candidates)
	want := []string{helper1.pubkey, helper2.pubkey}
	slices.Sort(want)
	if r.status != http.StatusConflict || body["error"] != messages.CodeAmbiguousRecipient || !slices.Equal(candidates, want) {
		t.Fatalf("HELPER: %d %s; want 409 ambiguous_recipient listing %v", r.status, r.body, want)
	}
	r = sendJSON(t, alice.c, map[string]string{"to": "zed", "message": "anyone?", "client_message_id": "unk-1"})
	if body := r.json(t); r.status != http.StatusNotFound || body["error"] != messages.CodeUnknownRecipient {
		t.Fatalf("zed: %d %s; want 404 unknown_recipient", r.status, r.body)
	}
	rows := byClientID(listAll(t, alice.c, ""))
	if _, ok := rows["amb-1"]; ok || len(rows) != 0 {
		t.Fatalf("refused sends stored rows: %v", rows)
	}
	mustSend(t, alice.c, helper1.pubkey, "by key, the id left free", "amb-1")

	mustSend(t, alice.c, "Reviewer", "review this", "by-name-1")
	if row := byClientID(listAll(t, alice.c, ""))["by-name-1"]; row.To != reviewer.pubkey {
		t.Fatalf("by-name-1 went to %q, want the reviewer's key %s", row.To, reviewer.pubkey)
	}
	if r := sendJSON(t, alice.c, map[string]string{"to": "Reviewer", "message": "review this", "client_message_id": "by-name-1"}); r.status != http.StatusAccepted && r.status != http.StatusOK {
		t.Fatalf("the same request again: %d %s; want the same outcome", r.status, r.body)
	}
	r = sendJSON(t, alice.c, map[string]string{"to": reviewer.pubkey, "message": "review this", "client_message_id": "by-name-1"})
	if body := r.json(t); r.status != http.StatusConflict || body["error"] != messages.CodeIdempotencyReused {
		t.Fatalf("the id by key after by name: %d %s; want 409 (the fingerprint covers the to as typed)", r.status, r.body)
	}
	got := sessionInbox(t, reviewer, 1)
	if got[0].ClientMessageID != "by-name-1" || got[0].SenderPubkey != alice.pubkey || messages.Deref(got[0].Body) != "review this" {
		t.Fatalf("reviewer's inbox: %+v", got[0])
	}
}

// sessionInbox waits until the session's GET /v1/inbox holds n items and
// returns them.
func sessionInbox(t *testing.T, s *agentSession, n int) []messages.InboxItem {
	t.Helper()
	var items []messages.InboxItem
	wait.For(t, e2eDeliverDeadline, s.name+"'s inbox", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		page, err := s.c.Inbox(ctx, url.Values{"mark_seen": {"false"}})
		if err != nil {
			t.Fatal(err)
		}
		items = page.Items
		return len(items) >= n
	})
	return items
}

// TestReplyToIDRoundTrip: reply_to_id travels from alice's POST /v1/send
// through the broker (replyToId in the send frame and the push) into the
// recipient's inbox and event, and a reply naming the first message's
// broker_message_id comes back the same way.
func TestReplyToIDRoundTrip(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	aliceEvents := openSSE(t, alice.env.socket(), "")
	bobEvents := openSSE(t, bob.env.socket(), "")

	r := sendJSON(t, alice.c, map[string]string{"to": bob.pubkey, "message": "question", "client_message_id": "q-1",
		"reply_to_id": "thread-0"})
	if r.status != http.StatusAccepted {
		t.Fatalf("q-1: %d %s", r.status, r.body)
	}
	q := messageOf(t, bobEvents.next("message", e2eDeliverDeadline))
	if q.ClientMessageID != "q-1" || q.ReplyToID != "thread-0" || q.BrokerMessageID == "" {
		t.Fatalf("bob's message event: %+v; want q-1 in reply to thread-0 with a broker_message_id", q)
	}
	r = sendJSON(t, bob.c, map[string]string{"to": alice.pubkey, "message": "answer", "client_message_id": "a-1",
		"replyToId": q.BrokerMessageID})
	if r.status != http.StatusAccepted {
		t.Fatalf("a-1: %d %s", r.status, r.body)
	}
	a := messageOf(t, aliceEvents.next("message", e2eDeliverDeadline))
	if a.ClientMessageID != "a-1" || string(a.ReplyToID) != q.BrokerMessageID {
		t.Fatalf("alice's message event: %+v; want a-1 in reply to %s", a, q.BrokerMessageID)
	}
	for _, c := range []struct {
		peer          *e2ePeer
		id, inReplyTo string
	}{{bob, "q-1", "thread-0"}, {alice, "a-1", q.BrokerMessageID}} {
		var stored *messages.InboxItem
		for _, it := range inboxAll(t, c.peer.c) {
			if it.ClientMessageID == c.id {
				stored = &it
			}
		}
		if stored == nil || string(stored.ReplyToID) != c.inReplyTo {
			t.Errorf("%s's inbox row of %s: %+v; want reply_to_id %s", c.peer.name, c.id, stored, c.inReplyTo)
		}
	}
}

// TestSendByNameOneMember: a name that several connections of one other
// member share, none an agent session — the upstream CLI's own
// connections (a hello with a session key of the process's, channel
// claude-code), which stay listed for the broker's grace after their
// command — names that member: POST /v1/send stores the member key
// (upstream's broker, and ours, push a DM to it to the member's live
// connections), where it answered 409 ambiguous_recipient. Agent sessions
// that share a name stay ambiguous (TestSendByDisplayName).
func TestSendByNameOneMember(t *testing.T) {
	m := newE2EMesh(t)
	carol := m.join("carol")
	m.restartBrokerWith("--legacy-protocol", "--rate-limit", "600", "--rate-window", "1m") // lists a member under its hello's name
	m.alice.startLegacy(t)
	member := joinedMember(t, carol.env, "demo")
	var clis []*wsClient
	for i := range 2 {
		session, err := meshcrypto.GenerateIdentity()
		if err != nil {
			t.Fatal(err)
		}
		c := dialBroker(t, fmt.Sprintf("twin-%d", i), member.BrokerURL)
		hello := member.hello(fmt.Sprintf("cli-%d", i))
		hello["sessionPubkey"], hello["displayName"], hello["channel"] = session.PublicKeyHex(), "twin", messages.ChannelUpstreamCLI
		c.send(hello)
		c.next("hello_ack")
		clis = append(clis, c)
	}
	waitTwins(t, m.alice.c, "twin", 2)

	r := sendJSON(t, m.alice.c, map[string]string{"to": "twin", "message": "to carol's CLI", "client_message_id": "twin-1"})
	if r.status != http.StatusAccepted {
		t.Fatalf("to twin: %d %s; want 202 to carol's member key", r.status, r.body)
	}
	if row := byClientID(listAll(t, m.alice.c, ""))["twin-1"]; row.To != carol.pubkey {
		t.Fatalf("twin-1 went to %q, want carol's member key %s", row.To, carol.pubkey)
	}
	if p := clis[0].push(); p["client_message_id"] != "twin-1" {
		t.Fatalf("carol's CLI got %v, want twin-1", p)
	}
	if r := sendCLI(t, m.alice.env, "twin", "by alice's CLI"); r.code != 0 { // it resolves the name itself
		t.Fatalf("claudemesh send twin: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	first, second := clis[1].push(), clis[1].push() // each of carol's connections gets each DM to her key
	if str(first, "client_message_id") != "twin-1" || str(second, "client_message_id") == "twin-1" || second["senderPubkey"] != m.alice.pubkey {
		t.Fatalf("carol's other CLI connection got %v, then %v; want twin-1, then alice's DM by the CLI", first, second)
	}
}

// waitTwins waits until c's GET /v1/peers lists n peers under name.
func waitTwins(t *testing.T, c *http.Client, name string, n int) {
	t.Helper()
	wait.For(t, e2eConnectDeadline, fmt.Sprintf("%d peers named %s", n, name), func() bool {
		var body struct {
			Peers []messages.Peer `json:"peers"`
		}
		if st, _, err := getJSON(c, "http://localhost/v1/peers?mesh=demo", &body); err != nil || st != http.StatusOK {
			return false
		}
		return len(messages.MatchPeers(name, body.Peers)) == n
	})
}
