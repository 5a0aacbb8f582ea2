package integration

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// Agent mail through real processes: two daemons (alice's and bob's, as
// two machines would run them) with agent sessions on each, a broker
// between them, and restarts of either daemon in between.

// mailSend sends body from s with the mail header req carries and returns
// its client_message_id.
func mailSend(t *testing.T, s *agentSession, req messages.SendRequest, body string) string {
	t.Helper()
	req.Message = &body
	if req.ClientMessageID == "" {
		req.ClientMessageID = fmt.Sprintf("%s-%d", s.name, time.Now().UnixNano())
	}
	res, err := s.c.Send(context.Background(), &req, "")
	if err != nil || res.Accepted == nil {
		t.Fatalf("%s sends %q: %+v %v", s.name, body, res, err)
	}
	return req.ClientMessageID
}

// inboxOf lists a session's inbox with the query q (not marking it read).
func inboxOf(t *testing.T, s *agentSession, q url.Values) []messages.InboxItem {
	t.Helper()
	q.Set("mark_seen", "false")
	page, err := s.c.Inbox(context.Background(), q)
	if err != nil {
		t.Fatalf("%s's inbox %v: %v", s.name, q, err)
	}
	return page.Items
}

// waitMail polls s's inbox (query q) until it holds the message with
// client_message_id id, and returns it.
func waitMail(t *testing.T, s *agentSession, q url.Values, id string) messages.InboxItem {
	t.Helper()
	var got messages.InboxItem
	wait.For(t, e2eDeliverDeadline, s.name+" has "+id, func() bool {
		for _, it := range inboxOf(t, s, q) {
			if it.ClientMessageID == id {
				got = it
				return true
			}
		}
		return false
	})
	return got
}

// waitRow polls s's outbox row id until cond holds of it, and returns it.
func waitRow(t *testing.T, s *agentSession, id, what string, cond func(*messages.OutboxItem) bool) *messages.OutboxItem {
	t.Helper()
	var row *messages.OutboxItem
	if err := wait.Until(e2eRecoveryDeadline, fmt.Sprintf("%s's row %s: %s", s.name, id, what), func() bool {
		var err error
		row, err = s.c.OutboxRow(context.Background(), "", id)
		return err == nil && row != nil && cond(row)
	}); err != nil {
		t.Fatalf("%v (%+v)", err, row)
	}
	return row
}

// mailPeers starts both daemons of m and registers ant (alice's) and cat
// (bob's), their broker connections up.
func mailPeers(t *testing.T, m *e2eMesh) (ant, cat *agentSession) {
	t.Helper()
	if m.alice.d == nil {
		m.alice.start(t)
		m.bob.start(t)
	}
	return mailSession(t, m.alice, "ant"), mailSession(t, m.bob, "cat")
}

// mailSession registers the session name on p's daemon and waits until
// its broker connection answers.
func mailSession(t *testing.T, p *e2ePeer, name string) *agentSession {
	t.Helper()
	s := registerSession(t, p.env.socket(), "demo", "sess-"+name, name)
	wait.For(t, e2eConnectDeadline, name+" connected", func() bool {
		_, err := s.c.Locks(context.Background(), "", "")
		return err == nil
	})
	return s
}

// TestAckWhileWorking: an acknowledgement reaches its sender while the
// sender is working (an agent during its turn, as its hooks report it):
// receipts travel at priority now, which the broker pushes whatever the
// recipient's status. At the default priority the receipt waited for the
// sender to be idle again, and its row said "not acknowledged" meanwhile.
func TestAckWhileWorking(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	ant, cat := mailPeers(t, m)
	working := messages.AgentWorking
	if _, err := ant.c.SetProfile(context.Background(), &messages.SetProfile{Status: &working}); err != nil {
		t.Fatal(err)
	}
	id := mailSend(t, ant, messages.SendRequest{To: cat.pubkey, AckRequired: true}, "review this, please")
	got := waitMail(t, cat, url.Values{}, id)
	if _, err := cat.c.AckMessage(context.Background(), got.ID); err != nil {
		t.Fatal(err)
	}
	waitRow(t, ant, id, "acknowledged by cat while ant works", func(r *messages.OutboxItem) bool { return len(r.AckedBy) == 1 })
}

// TestMailRoundTrip: a subject, an importance and a request for an
// acknowledgement travel with a DM and are stored with it; the inbox lists
// by them; the acknowledgement, given while the sender's daemon is down,
// reaches the sender's outbox row after it restarts; acknowledging again
// sends nothing more; a reply given without a thread joins the thread of
// the message it answers; and "still waiting for an acknowledgement" lists
// exactly the messages that are.
// Agent sessions ant (alice's daemon) and cat (bob's) through a broker on
// SQLite.
func TestMailRoundTrip(t *testing.T) {
	m := newE2EMesh(t)
	ant, cat := mailPeers(t, m)
	mailRoundTrip(t, m, ant, cat)
}

// TestMailRoundTripReplicas is TestMailRoundTrip between agent sessions
// connected to two broker replicas of one PostgreSQL database: ant
// (alice's daemon) to the first, cat (bob's) to the second. Each DM, the
// acknowledgement included, goes to a session another replica holds. A
// DM to a key no one holds is refused by the broker: the row is dead,
// unknown_recipient.
func TestMailRoundTripReplicas(t *testing.T) {
	m := newLockMesh(t).e2eMesh
	ant, cat := mailPeers(t, m)
	mailRoundTrip(t, m, ant, cat)
	id := mailSend(t, ant, messages.SendRequest{To: fmt.Sprintf("%064x", 0xdecaf)}, "to no one")
	waitRow(t, ant, id, "refused", func(r *messages.OutboxItem) bool {
		return r.Status == "dead" && messages.Deref(r.LastError) == "unknown_recipient"
	})
}

func mailRoundTrip(t *testing.T, m *e2eMesh, ant, cat *agentSession) {
	a1 := mailSend(t, ant, messages.SendRequest{To: cat.pubkey, Subject: "build <broken> & slow", Importance: "urgent",
		AckRequired: true}, "the build on main fails")
	got := waitMail(t, cat, url.Values{}, a1)
	if got.Subject != "build <broken> & slow" || got.Importance != "urgent" || !got.AckRequired || got.AckedAt != nil ||
		messages.Deref(got.Body) != "the build on main fails" || got.ThreadID != "" || len(got.Meta) != 0 {
		t.Fatalf("cat's copy: %+v", got)
	}
	for q, want := range map[string]int{"importance=urgent": 1, "importance=high": 0, "importance=normal": 0, "unacked=true": 1,
		"thread=" + a1: 1} {
		v, _ := url.ParseQuery(q)
		if n := len(inboxOf(t, cat, v)); n != want {
			t.Errorf("cat's inbox ?%s: %d messages, want %d", q, n, want)
		}
	}

	// The acknowledgement goes while ant's daemon is down, and cat's
	// daemon restarts in between: both ends keep it.
	m.alice.d.stop()
	m.bob.d.stop()
	m.bob.start(t)
	acked, err := cat.c.AckMessage(context.Background(), got.ID)
	if err != nil || acked.AckedAt == "" || acked.ClientMessageID != a1 || acked.ReceiptStatus == "" {
		t.Fatalf("cat acks: %+v %v", acked, err)
	}
	again, err := cat.c.AckMessage(context.Background(), got.ID)
	if err != nil || again.AckedAt != acked.AckedAt || again.ReceiptClientMessageID != acked.ReceiptClientMessageID {
		t.Fatalf("cat acks again: %+v %v (first %+v)", again, err, acked)
	}
	if n := len(inboxOf(t, cat, url.Values{"unacked": {"true"}})); n != 0 {
		t.Errorf("%d unacked after the ack", n)
	}
	m.alice.start(t)
	row := waitRow(t, ant, a1, "acked by cat", func(r *messages.OutboxItem) bool { return len(r.AckedBy) > 0 })
	if len(row.AckedBy) != 1 || row.AckedBy[0].Pubkey != cat.pubkey || row.AckedBy[0].Name != cat.name || row.Subject != got.Subject ||
		!row.AckRequired || row.Importance != "urgent" {
		t.Fatalf("ant's row: %+v", row)
	}

	// A reply without a thread joins the thread of what it answers (the
	// root's id); a second-level reply stays in it.
	c1 := mailSend(t, cat, messages.SendRequest{To: ant.pubkey, ReplyToID: a1}, "on it")
	reply := waitMail(t, ant, url.Values{}, c1)
	if reply.ThreadID != a1 || string(reply.ReplyToID) != a1 {
		t.Fatalf("ant's copy of the reply: %+v", reply)
	}
	a2 := mailSend(t, ant, messages.SendRequest{To: cat.pubkey, ReplyToID: reply.ID, AckRequired: true}, "thanks")
	if deep := waitMail(t, cat, url.Values{}, a2); deep.ThreadID != a1 || string(deep.ReplyToID) != c1 {
		t.Fatalf("cat's copy of the reply to the reply (given by its inbox id): %+v", deep)
	}
	if th := inboxOf(t, cat, url.Values{"thread": {a1}}); len(th) != 2 {
		t.Fatalf("cat's thread %s: %d messages, want the root and the second reply", a1, len(th))
	}

	// What ant still waits on: a2, not a1.
	page, err := ant.c.Outbox(context.Background(), url.Values{"awaiting_ack": {"true"}})
	if err != nil || len(page.Items) != 1 || page.Items[0].ClientMessageID != a2 {
		t.Fatalf("ant's awaiting: %+v %v", page, err)
	}
	if page, err = ant.c.Outbox(context.Background(), url.Values{"awaiting_ack": {"true"}, "older_than": {"1h"}}); err != nil ||
		len(page.Items) != 0 {
		t.Fatalf("ant's awaiting older than 1h: %+v %v", page, err)
	}
}

// TestMailContactPolicy: cat takes direct messages from its contacts only;
// a stranger's DM is held as a contact request (the stranger is told, not
// left in silence) and kept across a restart of cat's daemon; a peer cat
// wrote to is a contact and lands at once; accepting the request delivers
// the held message and tells the stranger; block_all refuses everyone,
// with a refusal the sender sees on its outbox row. Agent sessions, dog
// the stranger on ant's daemon, through a broker on SQLite.
func TestMailContactPolicy(t *testing.T) {
	m := newE2EMesh(t)
	ant, cat := mailPeers(t, m)
	mailContactPolicy(t, m, ant, cat, mailSession(t, m.alice, "dog"))
}

// TestMailContactPolicyReplicas is TestMailContactPolicy between agent
// sessions on two broker replicas of PostgreSQL: cat the recipient on the
// second, ant and dog the stranger on the first.
func TestMailContactPolicyReplicas(t *testing.T) {
	m := newLockMesh(t).e2eMesh
	ant, cat := mailPeers(t, m)
	mailContactPolicy(t, m, ant, cat, mailSession(t, m.alice, "dog"))
}

func mailContactPolicy(t *testing.T, m *e2eMesh, ant, cat, dog *agentSession) {
	ctx := context.Background()
	if _, err := cat.c.SetContactPolicy(ctx, &messages.ContactPolicyRequest{Policy: messages.PolicyContactsOnly,
		RequestTTL: "1h"}); err != nil {
		t.Fatal(err)
	}
	mailSend(t, cat, messages.SendRequest{To: ant.pubkey}, "hello ant") // ant is now cat's contact

	d1 := mailSend(t, dog, messages.SendRequest{To: cat.pubkey, Subject: "intro"}, "hi, I am the stranger")
	held := waitRow(t, dog, d1, "held", func(r *messages.OutboxItem) bool { return len(r.Receipts) > 0 })
	if r := held.Receipts[0]; r.Kind != messages.ReceiptHeld || r.Pubkey != cat.pubkey || r.Until == "" || r.Name != cat.name {
		t.Fatalf("the stranger's row: %+v", held.Receipts)
	}
	a1 := mailSend(t, ant, messages.SendRequest{To: cat.pubkey}, "ant writes back")
	waitMail(t, cat, url.Values{}, a1)
	if items := inboxOf(t, cat, url.Values{}); slices.ContainsFunc(items, func(it messages.InboxItem) bool { return it.ClientMessageID == d1 }) {
		t.Fatal("the stranger's held message is in cat's inbox")
	}

	m.bob.d.stop()
	m.bob.start(t)
	reqs, err := cat.c.ContactRequests(ctx, "")
	if err != nil || len(reqs.Requests) != 1 || reqs.Requests[0].Pubkey != dog.pubkey || len(reqs.Requests[0].Messages) != 1 ||
		reqs.Requests[0].Messages[0].Subject != "intro" {
		t.Fatalf("cat's requests after a restart: %+v %v", reqs, err)
	}
	decided, err := cat.c.DecideContact(ctx, &messages.ContactDecisionRequest{Peer: dog.pubkey[:12]}, true)
	if err != nil || decided.Decision != "accepted" || len(decided.Messages) != 1 {
		t.Fatalf("cat accepts the stranger: %+v %v", decided, err)
	}
	waitMail(t, cat, url.Values{}, d1)
	waitRow(t, dog, d1, "accepted", func(r *messages.OutboxItem) bool { return len(r.Receipts) == 2 })
	d2 := mailSend(t, dog, messages.SendRequest{To: cat.pubkey}, "thanks for having me")
	waitMail(t, cat, url.Values{}, d2) // a contact now
	contacts, err := cat.c.Contacts(ctx, "")
	if err != nil || contacts.Policy != messages.PolicyContactsOnly || len(contacts.Contacts) != 2 {
		t.Fatalf("cat's contacts: %+v %v", contacts, err)
	}

	if _, err := cat.c.SetContactPolicy(ctx, &messages.ContactPolicyRequest{Policy: messages.PolicyBlockAll}); err != nil {
		t.Fatal(err)
	}
	a2 := mailSend(t, ant, messages.SendRequest{To: cat.pubkey}, "are you there?")
	refused := waitRow(t, ant, a2, "refused", func(r *messages.OutboxItem) bool { return len(r.Receipts) > 0 })
	if r := refused.Receipts[0]; r.Kind != messages.ReceiptRefused || r.Reason != messages.ReasonBlockAll {
		t.Fatalf("ant's row: %+v", refused.Receipts)
	}
	if items := inboxOf(t, cat, url.Values{}); slices.ContainsFunc(items, func(it messages.InboxItem) bool { return it.ClientMessageID == a2 }) {
		t.Fatal("a message to a block_all session is in its inbox")
	}
}

// TestMailContactRequestRunsOut: a contact request that runs out
// unanswered is refused to its sender, in words (ReasonRequestExpired), so
// that the sender no longer waits for an acknowledgement that cannot come,
// and its message leaves the recipient's daemon. One ran out while cat's
// daemon was stopped: it is told at the daemon's start. One runs out while
// the daemon runs: it is told then. The shortest request_ttl is a minute,
// so the holds' times are set in cat's inbox.db while its daemon is
// stopped.
func TestMailContactRequestRunsOut(t *testing.T) {
	m := newE2EMesh(t)
	ant, cat := mailPeers(t, m)
	ctx := context.Background()
	if _, err := cat.c.SetContactPolicy(ctx, &messages.ContactPolicyRequest{Policy: messages.PolicyContactsOnly,
		RequestTTL: "1h"}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, body := range []string{"first", "second"} {
		id := mailSend(t, ant, messages.SendRequest{To: cat.pubkey, Subject: body, AckRequired: true}, body)
		waitRow(t, ant, id, "held", func(r *messages.OutboxItem) bool { return len(r.Receipts) > 0 })
		ids = append(ids, id)
	}

	m.bob.d.stop()
	db, err := sql.Open("sqlite", "file:"+m.bob.env.file("inbox.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	for i, until := range []time.Time{time.Now().Add(-time.Minute), time.Now().Add(4 * time.Second)} {
		res, err := db.Exec(`UPDATE inbox SET held_until = ? WHERE client_message_id = ? AND held_until IS NOT NULL`,
			until.UnixMilli(), ids[i])
		if n, _ := res.RowsAffected(); err != nil || n != 1 {
			t.Fatalf("set %s's hold: %d rows, %v", ids[i], n, err)
		}
	}
	db.Close()
	m.bob.start(t)

	for _, id := range ids {
		row := waitRow(t, ant, id, "refused as run out", func(r *messages.OutboxItem) bool { return !r.AwaitsAck() })
		last := row.Receipts[len(row.Receipts)-1]
		if last.Kind != messages.ReceiptRefused || last.Reason != messages.ReasonRequestExpired || last.Pubkey != cat.pubkey {
			t.Fatalf("ant's row %s: %+v", id, row.Receipts)
		}
	}
	page, err := ant.c.Outbox(ctx, url.Values{"awaiting_ack": {"true"}})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("ant still awaits: %+v %v", page, err)
	}
	reqs, err := cat.c.ContactRequests(ctx, "")
	if err != nil || len(reqs.Requests) != 0 {
		t.Fatalf("cat's requests: %+v %v", reqs, err)
	}
	// The messages are gone from cat's daemon: its inbox.db, read while it
	// runs.
	db, err = sql.Open("sqlite", "file:"+m.bob.env.file("inbox.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRow(`SELECT count(*) FROM inbox WHERE client_message_id IN (?, ?)`, ids[0], ids[1]).Scan(&left); err != nil ||
		left != 0 {
		t.Fatalf("cat's inbox.db keeps %d of the run-out messages (%v)", left, err)
	}
}
