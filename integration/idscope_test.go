package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// TestSendIDPerSender: one daemon serves three senders — the embedded
// broker's `local` mesh, an agent `reviewer` of it (`daemon add-agent`),
// and a mesh `demo` on a broker of its own (`join`) — and each sends
// "*" under the client_message_id xm-1 (issue 16, defect 1: the
// second answered 200 duplicate with the first's broker id and was never
// sent). Each send is its own message: 202, a row of its own; local's and
// demo's reach their recipients (reviewer, bob), and `claudemesh send
// --wait` follows demo's row, not local's. A retry is a duplicate and a
// changed body a conflict, per sender. reviewer shares local's broker
// mesh, whose dedupe is keyed by (mesh, sender, id) since broker migration
// 0005: there too its message is its own (201), and reaches local. A send
// through the cold path and its retry through the daemon are one request
// to the broker.
func TestSendIDPerSender(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t) // demo: alice and bob joined; the invite has a use left
	e := newEnv(t)
	if err := os.Remove(filepath.Join(e.configDir, "config.json")); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, e, "daemon", "add-agent", "reviewer"); r.code != 0 {
		t.Fatalf("daemon add-agent reviewer: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, e, "join", m.invite, "--name", "carol"); r.code != 0 {
		t.Fatalf("join demo: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	m.bob.start(t)
	startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	for _, mesh := range []string{"local", "reviewer", "demo"} {
		wait.For(t, e2eConnectDeadline, mesh+" connected", func() bool { return meshConnected(c, mesh) })
	}

	send := func(mesh, body string) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"to": "*", "message": body, "mesh": mesh, "client_message_id": "xm-1"})
		resp, err := c.Post("http://localhost/v1/send", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	rowOf := func(mesh string) *messages.OutboxItem {
		t.Helper()
		var page messages.OutboxPage
		q := url.Values{"client_message_id": {"xm-1"}, "mesh": {mesh}}
		if st, _, err := getJSON(c, "http://localhost/v1/outbox?"+q.Encode(), &page); err != nil || st != 200 || len(page.Items) > 1 {
			t.Fatalf("GET /v1/outbox?%s: %d %v %+v", q.Encode(), st, err, page)
		}
		if len(page.Items) == 0 {
			return nil
		}
		return &page.Items[0]
	}
	inbox := func(cl *http.Client, mesh string) []messages.InboxItem {
		var page messages.InboxPage
		getJSON(cl, "http://localhost/v1/inbox?mark_seen=false&mesh="+mesh, &page)
		return page.Items
	}
	received := func(cl *http.Client, mesh, body string) int {
		n := 0
		for _, it := range inbox(cl, mesh) {
			if it.ClientMessageID == "xm-1" && messages.Deref(it.Body) == body {
				n++
			}
		}
		return n
	}

	if st, resp := send("local", "from local"); st != http.StatusAccepted {
		t.Fatalf("local: %d %v", st, resp)
	}
	wait.For(t, e2eDeliverDeadline, "local's xm-1 to be done and at reviewer", func() bool {
		row := rowOf("local")
		return row != nil && row.Status == messages.StatusDone && received(c, "reviewer", "from local") == 1
	})
	localID := *rowOf("local").BrokerMessageID

	// The same body from reviewer: its own message, not local's duplicate.
	if st, resp := send("reviewer", "from local"); st != http.StatusAccepted || resp["duplicate"] != nil {
		t.Fatalf("reviewer with local's id and body: %d %v, want 202", st, resp)
	}
	// The same id from demo, through the CLI, which waits for demo's row.
	r := runCLI(t, e, "send", "--mesh", "demo", "--client-message-id", "xm-1", "--wait", "10s", "*", "from demo")
	if r.code != 0 || !regexp.MustCompile(`^delivered xm-1 to \*: the broker accepted it as [0-9A-Z]{26}\n$`).MatchString(r.stdout) ||
		strings.Contains(r.stdout, localID) {
		t.Fatalf("send --mesh demo --wait: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	wait.For(t, e2eDeliverDeadline, "demo's xm-1 at bob", func() bool { return received(m.bob.c, "demo", "from demo") == 1 })
	demoID := *rowOf("demo").BrokerMessageID
	if demoID == localID {
		t.Fatalf("demo's message was recorded as local's (%s)", localID)
	}
	var rev *messages.OutboxItem
	wait.For(t, e2eDeliverDeadline, "reviewer's row to be done and its xm-1 at local", func() bool {
		if rev = rowOf("reviewer"); rev != nil && rev.Status == messages.StatusDead {
			t.Fatalf("reviewer's row is dead (%s): local's broker took its xm-1 for local's", messages.Deref(rev.LastError))
		}
		return rev != nil && rev.Status == messages.StatusDone && received(c, "local", "from local") == 1
	})
	reviewerID := messages.Deref(rev.BrokerMessageID)
	if reviewerID == localID || reviewerID == demoID {
		t.Fatalf("reviewer's message was recorded as another sender's (%s): swallowed as its duplicate", reviewerID)
	}
	var all messages.OutboxPage
	if st, _, err := getJSON(c, "http://localhost/v1/outbox?client_message_id=xm-1", &all); err != nil || st != 200 || len(all.Items) != 3 {
		t.Fatalf("the rows of xm-1: %d %v %+v, want one per sender", st, err, all.Items)
	}

	// Retries and conflicts, per sender.
	if st, resp := send("local", "from local"); st != 200 || resp["broker_message_id"] != localID {
		t.Errorf("local's retry: %d %v, want 200 duplicate %s", st, resp, localID)
	}
	if st, resp := send("reviewer", "from local"); st != 200 || resp["broker_message_id"] != reviewerID {
		t.Errorf("reviewer's retry: %d %v, want 200 duplicate %s", st, resp, reviewerID)
	}
	if st, resp := send("demo", "from demo"); st != 200 || resp["broker_message_id"] != demoID {
		t.Errorf("demo's retry: %d %v, want 200 duplicate %s", st, resp, demoID)
	}
	if st, resp := send("demo", "changed"); st != 409 || resp["conflict"] != "outbox_done_fingerprint_mismatch" || resp["broker_message_id"] != demoID {
		t.Errorf("demo, changed body: %d %v", st, resp)
	}
	if st, resp := send("local", "changed"); st != 409 || resp["broker_message_id"] != localID {
		t.Errorf("local, changed body: %d %v", st, resp)
	}

	// The cold path and the daemon send one request for one id and mesh.
	if r := runCLI(t, e, "send", "--no-daemon", "--mesh", "demo", "--client-message-id", "cold-1", "*", "cold"); r.code != 0 {
		t.Fatalf("cold send: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, e, "send", "--mesh", "demo", "--client-message-id", "cold-1", "--wait", "10s", "*", "cold")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "delivered cold-1 to *") {
		t.Errorf("the cold send's retry through the daemon: exit %d\nstdout %q\nstderr %s; want the broker's duplicate", r.code, r.stdout, r.stderr)
	}

	if n := received(c, "reviewer", "from local"); n != 1 {
		t.Errorf("reviewer holds local's xm-1 %d times", n)
	}
	if n := received(c, "local", "from local"); n != 1 {
		t.Errorf("local holds reviewer's xm-1 %d times", n)
	}
	if n := received(m.bob.c, "demo", "from demo"); n != 1 {
		t.Errorf("bob holds demo's xm-1 %d times", n)
	}
	t.Logf("checked: one id from three senders is three messages (local's at reviewer, reviewer's at local, demo's at bob, " +
		"send --wait on demo's row); retries and conflicts per sender")
}
