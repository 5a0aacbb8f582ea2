package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// localDaemon starts a daemon on the embedded broker's local mesh, as a
// newcomer's first `claudemesh daemon up` does (no mesh joined), and
// waits for the mesh to connect.
func localDaemon(t *testing.T) (*env, *http.Client) {
	t.Helper()
	e := newEnv(t)
	if err := os.Remove(filepath.Join(e.configDir, "config.json")); err != nil { // the default: no mesh joined
		t.Fatal(err)
	}
	startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	t.Cleanup(c.CloseIdleConnections)
	wait.For(t, e2eConnectDeadline, "the local mesh on the embedded broker", func() bool { return meshConnected(c, "local") })
	return e, c
}

// TestAPIQuickStart runs the quick-start of docs/API.md ("Sending over the
// socket") and holds the page to what a newcomer sees: the repeated
// request answers 200 duplicate once the first went out, another body
// under the id is the 409 of a done row, and a `#<id>` is a topic's id
// the mesh has (an id-shaped name of none is 404).
func TestAPIQuickStart(t *testing.T) {
	t.Parallel()
	e, c := localDaemon(t)
	if r := runCLI(t, e, "topic", "create", "builds"); r.code != 0 {
		t.Fatalf("topic create builds: exit %d\n%s", r.code, r.stderr)
	}
	send := func(body string) *response {
		req := newRequest(t, http.MethodPost, "http://localhost/v1/send", []byte(body))
		req.Header.Set("Idempotency-Key", "build-42-done")
		return do(t, c, req)
	}
	const green = `{"to":"#builds","message":"build 42 is green","priority":"next"}`
	if r := send(green); r.status != http.StatusAccepted || string(r.body) != `{"client_message_id":"build-42-done","status":"queued"}`+"\n" {
		t.Fatalf("first send: %d %s; want 202 queued", r.status, r.body)
	}
	var dup map[string]any
	wait.For(t, e2eDeliverDeadline, "the repeated request to answer 200 duplicate", func() bool {
		r := send(green)
		if r.status == http.StatusAccepted {
			return false // still on its way to the broker
		}
		if dup = r.json(t); r.status != http.StatusOK {
			t.Fatalf("repeated send: %d %s; want 202 until sent, then 200", r.status, r.body)
		}
		return true
	})
	if dup["duplicate"] != true || dup["client_message_id"] != "build-42-done" || dup["broker_message_id"] == nil || dup["history_id"] == nil {
		t.Errorf("repeated send answered %v; want duplicate:true with the broker's ids", dup)
	}
	r := send(`{"to":"#builds","message":"build 42 is red","priority":"next"}`)
	conflict := r.json(t)
	if r.status != http.StatusConflict || conflict["error"] != "idempotency_key_reused" ||
		conflict["conflict"] != "outbox_done_fingerprint_mismatch" || conflict["broker_message_id"] != dup["broker_message_id"] {
		t.Errorf("another body under the id: %d %s; want 409 outbox_done_fingerprint_mismatch naming the broker's id", r.status, r.body)
	}

	list := runCLI(t, e, "topic", "list", "--json")
	var topics struct {
		Topics []struct{ ID, Name string }
	}
	if err := json.Unmarshal([]byte(list.stdout), &topics); err != nil || len(topics.Topics) != 1 || topics.Topics[0].Name != "builds" {
		t.Fatalf("topic list --json: %v %q", err, list.stdout)
	}
	if r := post(t, c, sendBody(t, "#"+topics.Topics[0].ID, "by id", "")); r.status != http.StatusAccepted {
		t.Errorf("send to #<the topic's id>: %d %s; want 202", r.status, r.body)
	}
	unknown := strings.Repeat("A", 24)
	if r := post(t, c, sendBody(t, "#"+unknown, "no such topic", "")); r.status != http.StatusNotFound || r.json(t)["error"] != "topic_not_found" {
		t.Errorf("send to #%s (id-shaped, no topic): %d %s; want 404 topic_not_found", unknown, r.status, r.body)
	}
}
