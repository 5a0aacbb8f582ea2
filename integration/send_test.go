package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// sendDeliveryDeadline bounds how long a sent message may take to reach the
// recipient daemon's inbox.
const sendDeliveryDeadline = 15 * time.Second

// sendMesh is a real broker process with a mesh `demo` that alice and bob
// joined into fresh config directories (no offline membership).
type sendMesh struct {
	brokerEnv, aliceEnv, bobEnv *env
	alice, bob                  *brokerMember
}

func newSendMesh(t *testing.T) *sendMesh {
	t.Helper()
	s := &sendMesh{brokerEnv: newEnv(t), aliceEnv: newEnv(t), bobEnv: newEnv(t)}
	dir := filepath.Join(s.brokerEnv.daemonDir, "broker")
	b := startBrokerProc(t, s.brokerEnv, "--dir", dir)
	base := "http://" + b.addr
	if r := runCLI(t, s.brokerEnv, "broker", "mesh", "create", "demo", "--dir", dir); r.code != 0 {
		t.Fatalf("broker mesh create: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	r := runCLI(t, s.brokerEnv, "broker", "invite", "demo", "--uses", "2", "--dir", dir, "--broker-url", base)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 {
		t.Fatalf("broker invite: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	inviteURL := lines[len(lines)-1]
	for _, j := range []struct {
		e    *env
		name string
	}{{s.aliceEnv, "alice"}, {s.bobEnv, "bob"}} {
		// Delivery tests use config directories where join records the only mesh.
		if err := os.Remove(filepath.Join(j.e.configDir, "config.json")); err != nil {
			t.Fatal(err)
		}
		if r := runCLI(t, j.e, "join", inviteURL, "--name", j.name); r.code != 0 {
			t.Fatalf("join --name %s: exit %d\nstdout %q\nstderr %s", j.name, r.code, r.stdout, r.stderr)
		}
	}
	s.alice, s.bob = joinedMember(t, s.aliceEnv, "demo"), joinedMember(t, s.bobEnv, "demo")
	return s
}

// waitPeers polls e's daemon GET /v1/peers?mesh=demo until every pubkey in
// want is listed.
func waitPeers(t *testing.T, e *env, want ...string) {
	t.Helper()
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	var last any
	if err := wait.Until(sendDeliveryDeadline, fmt.Sprintf("peers of %s to list %v", e.socket(), want), func() bool {
		var body struct {
			Peers []messages.Peer `json:"peers"`
		}
		st, _, err := getJSON(c, "http://localhost/v1/peers?mesh=demo", &body)
		if err != nil || st != http.StatusOK {
			last = []any{st, err}
			return false
		}
		last = body.Peers
		for _, w := range want {
			if !slices.ContainsFunc(body.Peers, func(p messages.Peer) bool { return p.Pubkey == w }) {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("%v; last %v", err, last)
	}
}

// waitInbox polls e's daemon GET /v1/inbox until an item with body shows
// up, and returns it.
func waitInbox(t *testing.T, e *env, body string) messages.InboxItem {
	t.Helper()
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	var found messages.InboxItem
	wait.For(t, sendDeliveryDeadline, fmt.Sprintf("%q in the inbox of %s", body, e.socket()), func() bool {
		var page messages.InboxPage
		if st, _, err := getJSON(c, "http://localhost/v1/inbox?limit=200", &page); err == nil && st == http.StatusOK {
			for _, it := range page.Items {
				if it.Body != nil && *it.Body == body {
					found = it
					return true
				}
			}
		}
		return false
	})
	return found
}

// sendCLI runs `claudemesh send` with e's directories.
func sendCLI(t *testing.T, e *env, args ...string) cliResult {
	t.Helper()
	return runCLI(t, e, append([]string{"send"}, args...)...)
}

// TestSendCommand drives `claudemesh send` against a real broker and two
// real daemons: through alice's daemon (pubkey, display name, broadcast,
// topic, idempotency), then the cold path with alice's daemon stopped and
// with --no-daemon, and the usage errors.
func TestSendCommand(t *testing.T) {
	s := newSendMesh(t)
	aliceD := startDaemon(t, s.aliceEnv)
	startDaemon(t, s.bobEnv)
	// Both daemons connected to the broker: alice's daemon sees both.
	waitPeers(t, s.aliceEnv, s.alice.Pubkey, s.bob.Pubkey)

	t.Run("daemon pubkey", func(t *testing.T) {
		r := sendCLI(t, s.aliceEnv, "--client-message-id", "e2e-1", s.bob.Pubkey, "hi")
		want := "queued e2e-1 to " + s.bob.Pubkey + "\n"
		if r.code != 0 || (r.stdout != want && r.stdout != "inflight e2e-1 to "+s.bob.Pubkey+"\n") {
			t.Fatalf("send: exit %d\nstdout %q, want %q\nstderr %s", r.code, r.stdout, want, r.stderr)
		}
		it := waitInbox(t, s.bobEnv, "hi")
		if it.SenderPubkey != s.alice.Pubkey || it.Kind != messages.KindDM || it.ClientMessageID != "e2e-1" {
			t.Errorf("bob's inbox item %+v: want a DM e2e-1 from alice %s", it, s.alice.Pubkey)
		}
	})

	t.Run("daemon --wait", func(t *testing.T) {
		r := sendCLI(t, s.aliceEnv, "--client-message-id", "wait-1", "--wait", "20s", s.bob.Pubkey, "waited for")
		if r.code != 0 || !regexp.MustCompile(`^delivered wait-1 to `+s.bob.Pubkey+`: the broker accepted it as [0-9A-Z]{26}\n$`).MatchString(r.stdout) {
			t.Fatalf("send --wait: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		}
		r = sendCLI(t, s.aliceEnv, "--client-message-id", "wait-1", "--wait", "20s", "--json", s.bob.Pubkey, "waited for")
		var row outboxItem
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &row) != nil || row.Status != "done" || row.ClientMessageID != "wait-1" {
			t.Fatalf("send --wait --json again: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("daemon display name and prefix", func(t *testing.T) {
		r := sendCLI(t, s.aliceEnv, "BOB", "by name")
		if r.code != 0 || !regexp.MustCompile(`^queued [0-9A-Z]{26} to BOB \(`+s.bob.Pubkey[:16]+`…\)\n$`).MatchString(r.stdout) {
			t.Fatalf("send BOB: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if it := waitInbox(t, s.bobEnv, "by name"); it.Kind != messages.KindDM {
			t.Errorf("by name arrived as %+v, want a DM", it)
		}
		if r := sendCLI(t, s.aliceEnv, s.bob.Pubkey[:10], "by prefix"); r.code != 0 {
			t.Fatalf("send <prefix>: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		}
		waitInbox(t, s.bobEnv, "by prefix")
		r = sendCLI(t, s.aliceEnv, "carol", "nobody")
		if r.code != 1 || !strings.Contains(r.stderr, `no peer matches "carol"`) || !strings.Contains(r.stderr, "bob") {
			t.Errorf("send carol: exit %d, stderr %q; want 1 naming the peers seen", r.code, r.stderr)
		}
	})

	t.Run("daemon broadcast and topic", func(t *testing.T) {
		if r := sendCLI(t, s.aliceEnv, "--json", "*", "to everyone"); r.code != 0 {
			t.Fatalf("send *: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		} else {
			var m map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m["client_message_id"] == "" || (m["status"] != "queued" && m["status"] != "inflight") {
				t.Errorf("send --json: %q (%v), want the daemon's 202 object", r.stdout, err)
			}
		}
		waitInbox(t, s.bobEnv, "to everyone")
		if r := runCLI(t, s.bobEnv, "topic", "create", "ops", "--json"); r.code != 0 { // bob leads #ops
			t.Fatalf("topic create ops: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if r := sendCLI(t, s.aliceEnv, "--priority", "now", "--meta", `{"k":"v"}`, "#ops", "on topic"); r.code != 0 {
			t.Fatalf("send #ops: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if it := waitInbox(t, s.bobEnv, "on topic"); it.Kind != "topic" || !messages.IsTopicID(string(it.Topic)) {
			t.Errorf("topic message arrived as %+v, want the topic's id", it)
		}
	})

	t.Run("daemon idempotency", func(t *testing.T) {
		args := []string{"--client-message-id", "dup-1", s.bob.Pubkey, "same body"}
		if r := sendCLI(t, s.aliceEnv, args...); r.code != 0 {
			t.Fatalf("first send: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		}
		r := sendCLI(t, s.aliceEnv, args...)
		if r.code != 0 || !regexp.MustCompile(`^(queued dup-1 to |inflight dup-1 to |already delivered \(duplicate\) dup-1 to )`).MatchString(r.stdout) {
			t.Fatalf("same send again: exit %d\nstdout %q\nstderr %s; want the row's state", r.code, r.stdout, r.stderr)
		}
		r = sendCLI(t, s.aliceEnv, "--client-message-id", "dup-1", s.bob.Pubkey, "another body")
		if r.code != 1 || !strings.Contains(r.stderr, "idempotency_key_reused") || !strings.Contains(r.stderr, "fingerprint_mismatch") {
			t.Fatalf("other body, same id: exit %d\nstdout %q\nstderr %q; want 1 naming idempotency_key_reused", r.code, r.stdout, r.stderr)
		}
		waitInbox(t, s.bobEnv, "same body")
		// Once the row is done, the same request is reported as a duplicate.
		c := unixClient(s.aliceEnv.socket())
		defer c.CloseIdleConnections()
		wait.For(t, sendDeliveryDeadline, "dup-1 done in alice's outbox", func() bool {
			return slices.ContainsFunc(listAll(t, c, messages.StatusDone), func(it outboxItem) bool { return it.ClientMessageID == "dup-1" })
		})
		r = sendCLI(t, s.aliceEnv, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "already delivered (duplicate) dup-1 to ") || strings.Contains(r.stdout, "unknown") {
			t.Errorf("send of a done row: exit %d\nstdout %q\nstderr %s; want the duplicate with its broker_message_id", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("daemon not attached to the mesh asked for", func(t *testing.T) {
		r := sendCLI(t, s.aliceEnv, "--mesh", "other", "*", "x")
		if r.code != 2 || !strings.Contains(r.stderr, "not attached to mesh other (it serves: demo)") ||
			!strings.Contains(r.stderr, "records no mesh other") {
			t.Errorf("send --mesh other: exit %d\nstdout %q\nstderr %q; want the note and the cold path's error", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("no-daemon forces the cold path", func(t *testing.T) {
		r := sendCLI(t, s.aliceEnv, "--no-daemon", "--client-message-id", "forced-1", "bob", "forced cold")
		if r.code != 0 || !regexp.MustCompile(`^sent forced-1 to bob \(`+s.bob.Pubkey[:16]+`…\) broker_message_id \S+\n$`).MatchString(r.stdout) {
			t.Fatalf("send --no-daemon: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if it := waitInbox(t, s.bobEnv, "forced cold"); it.SenderPubkey != s.alice.Pubkey || it.ClientMessageID != "forced-1" {
			t.Errorf("cold DM arrived as %+v", it)
		}
		c := unixClient(s.aliceEnv.socket())
		defer c.CloseIdleConnections()
		if slices.ContainsFunc(listAll(t, c, ""), func(it outboxItem) bool { return it.ClientMessageID == "forced-1" }) {
			t.Error("--no-daemon send went through alice's daemon outbox")
		}
	})

	t.Run("cold path with the daemon stopped", func(t *testing.T) {
		aliceD.stop()
		r := sendCLI(t, s.aliceEnv, "--client-message-id", "cold-1", s.bob.Pubkey, "cold")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "sent cold-1 to "+s.bob.Pubkey+" broker_message_id ") {
			t.Fatalf("cold send: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if it := waitInbox(t, s.bobEnv, "cold"); it.SenderPubkey != s.alice.Pubkey {
			t.Errorf("cold DM arrived as %+v", it)
		}
		// The broker's dedupe answers a repeat and a conflicting reuse.
		r = sendCLI(t, s.aliceEnv, "--client-message-id", "cold-1", s.bob.Pubkey, "cold")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "already delivered (duplicate) cold-1 ") {
			t.Errorf("cold repeat: exit %d\nstdout %q\nstderr %s; want the duplicate", r.code, r.stdout, r.stderr)
		}
		r = sendCLI(t, s.aliceEnv, "--client-message-id", "cold-1", s.bob.Pubkey, "cold but different")
		if r.code != 1 || !strings.Contains(r.stderr, "idempotency_key_reused") {
			t.Errorf("cold conflicting reuse: exit %d\nstdout %q\nstderr %q; want 1 naming idempotency_key_reused", r.code, r.stdout, r.stderr)
		}
		r = sendCLI(t, s.aliceEnv, "--json", "*", "cold topic")
		var ack map[string]any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ack) != nil || ack["code"] != float64(201) || ack["via"] != "broker" {
			t.Errorf("cold --json: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
		}
		waitInbox(t, s.bobEnv, "cold topic")
	})

	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"#bad topic", "x"},
			{"@", "x"},
			{"*", ""},
			{"--meta", "[1]", "*", "x"},
			{"--meta", "{bad", "*", "x"},
			{"--priority", "urgent", "*", "x"},
			{"--client-message-id", "has space", "*", "x"},
		} {
			if r := sendCLI(t, s.aliceEnv, args...); r.code != 2 {
				t.Errorf("send %q: exit %d, want 2\nstdout %q\nstderr %s", args, r.code, r.stdout, r.stderr)
			}
		}
	})
}

// TestSendLocalMeshNeedsDaemon: with no daemon and only a local membership
// (served by the daemon's embedded broker), send says to start the daemon.
func TestSendLocalMeshNeedsDaemon(t *testing.T) {
	e := newEnv(t)
	doc := `{"meshes":[{"meshId":"m","memberId":"u","slug":"local","name":"local","pubkey":"` + strings.Repeat("ab", 32) +
		`","secretKey":"` + strings.Repeat("cd", 64) + `","brokerUrl":""}]}`
	if err := os.WriteFile(filepath.Join(e.configDir, "config.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	r := sendCLI(t, e, "*", "hello")
	if r.code != 1 || !strings.Contains(r.stderr, "the local mesh needs the daemon: start it with `claudemesh daemon up`") {
		t.Errorf("send with a local-only config and no daemon: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
	if r := sendCLI(t, e, "--mesh", "other", "*", "hello"); r.code != 2 || !strings.Contains(r.stderr, "records no mesh other") {
		t.Errorf("send --mesh other: exit %d, stderr %q; want 2", r.code, r.stderr)
	}
}

// TestSendWaitTimesOut: with the broker out of reach, `send --wait` says the
// message is still pending once the wait runs out, exits 3, and leaves the
// row queued.
func TestSendWaitTimesOut(t *testing.T) {
	e := newEnv(t) // its mesh's broker does not answer
	startDaemon(t, e, "--no-tcp")
	r := sendCLI(t, e, "--client-message-id", "wait-out", "--wait", "300ms", "@ops", "nobody home")
	if r.code != 3 || !strings.Contains(r.stderr, "wait-out to @ops is still pending after 300ms") ||
		!strings.Contains(r.stderr, "stays queued") {
		t.Fatalf("send --wait with no broker: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	if !slices.ContainsFunc(listAll(t, c, messages.StatusPending), func(it outboxItem) bool { return it.ClientMessageID == "wait-out" }) {
		t.Error("the row is not pending after the wait")
	}
}
