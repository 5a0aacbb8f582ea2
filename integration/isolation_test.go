package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestE2EMeshPanicIsolated: bob's daemon serves two meshes, and the inbox of
// one panics at its first message push (CLAUDEMESH_FAULT_INBOX_PANIC, read
// by a binary built with `-tags faults`). That
// mesh's subtree restarts and delivers again; bob's other mesh keeps
// delivering and his IPC keeps answering meanwhile; the daemon never exits.
func TestE2EMeshPanicIsolated(t *testing.T) {
	m := newE2EMesh(t)
	r := m.brokerCLI("mesh", "create", "other")
	if r.code != 0 {
		t.Fatalf("broker mesh create other: exit %d\n%s", r.code, r.stderr)
	}
	r = m.brokerCLI("invite", "other", "--uses", "2", "--broker-url", "http://"+m.broker.addr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, p := range []*e2ePeer{m.alice, m.bob} {
		if r := runCLI(t, p.env, "join", lines[len(lines)-1], "--name", p.name); r.code != 0 {
			t.Fatalf("%s joins other: exit %d\n%s", p.name, r.code, r.stderr)
		}
	}
	bobOn := map[string]string{"demo": m.bob.pubkey, "other": joinedMember(t, m.bob.env, "other").Pubkey}
	// Alice's daemon is the production binary: it ignores the variable.
	m.alice.env.extra = []string{"CLAUDEMESH_FAULT_INBOX_PANIC=demo"}
	m.bob.env.extra = []string{"CLAUDEMESH_FAULT_INBOX_PANIC=demo"}
	m.bob.env.bin = faultsBinary(t)
	m.alice.start(t)
	m.bob.start(t)
	if strings.Contains(m.alice.d.stderr.String(), "fault_injection_armed") {
		t.Fatal("a binary built without -tags faults armed a fault")
	}
	if !strings.Contains(m.bob.d.stderr.String(), "fault_injection_armed") {
		t.Fatalf("bob's daemon did not arm the fault:\n%s", m.bob.d.stderr.String())
	}
	events := openSSE(t, m.bob.env.socket(), "")
	defer events.close()
	send := func(mesh, body string) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"mesh": mesh, "to": bobOn[mesh], "message": body, "client_message_id": body})
		resp, err := m.alice.c.Post("http://localhost/v1/send", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatalf("send %s on %s: %v", body, mesh, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("send %s on %s: %d %s", body, mesh, resp.StatusCode, out)
		}
	}

	send("demo", "boom") // bob's inbox of demo panics on it
	fired := func() bool { return strings.Contains(m.bob.d.stderr.String(), "fault injection: inbox of mesh demo") }
	pending := map[string]bool{}
	for i := range 20 {
		body := fmt.Sprintf("other-%d", i)
		send("other", body)
		pending[body] = true
	}
	// The other mesh delivers while demo restarts, and bob answers
	// throughout. The push demo panicked on was not acked; the broker frees
	// its lease when demo's connection closes, so the restarted demo gets it
	// again, once.
	pending["boom"] = true
	for len(pending) > 0 {
		it := messageOf(t, events.next("message", e2eDeliverDeadline))
		want := "other"
		if it.ClientMessageID == "boom" {
			want = "demo"
		}
		if it.Mesh != want || !pending[it.ClientMessageID] {
			t.Fatalf("unexpected message %s on %s while demo restarts", it.ClientMessageID, it.Mesh)
		}
		delete(pending, it.ClientMessageID)
		if st, _, err := getJSON(m.bob.c, "http://localhost/v1/health", nil); err != nil || st != http.StatusOK {
			t.Fatalf("bob's /v1/health while demo restarts: %d %v", st, err)
		}
	}
	if err := wait.Until(e2eDeliverDeadline, "the fault in bob's log", fired); err != nil {
		t.Fatalf("%v:\n%s", err, m.bob.d.stderr.String())
	}
	m.bob.waitConnected(t) // demo's subtree, restarted, is back on the broker
	send("demo", "after")
	it := messageOf(t, events.next("message", e2eDeliverDeadline))
	if it.Mesh != "demo" || it.ClientMessageID != "after" || it.Body == nil || *it.Body != "after" {
		t.Fatalf("after the restart, bob got %+v on %s, want \"after\" on demo", it, it.Mesh)
	}
	if m.bob.d.exited() {
		t.Fatalf("bob's daemon exited: %v", m.bob.d.waitErr)
	}
	t.Logf("checked: 20 messages on mesh other and bob's /v1/health during the restart of mesh demo; " +
		"demo delivers the message it panicked on once, and new ones, after it; the daemon still runs")
}
