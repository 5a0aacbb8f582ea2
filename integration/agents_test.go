package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// TestLocalAgents: with nothing but `daemon up`, agents on one machine
// message each other through the embedded broker — each a member of the
// local mesh of its own (`daemon add-agent`). A DM reaches its agent only; a
// topic message reaches every other agent, each in its own inbox though the
// client_message_id is the same; `claudemesh send --mesh` names the
// sending agent and resolves the recipient by name.
func TestLocalAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := os.Remove(filepath.Join(e.configDir, "config.json")); err != nil { // the default: no mesh joined
		t.Fatal(err)
	}
	for _, name := range []string{"bob", "carol"} {
		if r := runCLI(t, e, "daemon", "add-agent", name); r.code != 0 || !strings.HasPrefix(r.stdout, "added agent "+name) {
			t.Fatalf("daemon add-agent %s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, e, "daemon", "add-agent", "bob"); r.code != 2 || !strings.Contains(r.stderr, "already has mesh \"bob\"") {
		t.Errorf("adding bob twice: exit %d\n%s", r.code, r.stderr)
	}
	// With the daemon down a plain send chooses its mesh from config.json as
	// the daemon would — the first agent's, not another's identity — and
	// says the local mesh needs the daemon.
	if r := runCLI(t, e, "send", "bob", "x"); r.code == 0 || !strings.Contains(r.stderr, "claudemesh daemon up") ||
		strings.Contains(r.stderr, "several meshes") {
		t.Errorf("send with the daemon down: exit %d\n%s", r.code, r.stderr)
	}
	d := startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	var v messages.Version
	if st, _, err := getJSON(c, "http://localhost/v1/version", &v); err != nil || st != http.StatusOK || len(v.Meshes) != 3 {
		t.Fatalf("GET /v1/version: %d %v %+v", st, err, v.Meshes)
	}
	key := map[string]string{}
	for _, m := range v.Meshes {
		key[m.Mesh] = m.MemberPubkey
	}
	wait.For(t, e2eConnectDeadline, "every agent on the embedded broker", func() bool {
		var h messages.Health
		getJSON(c, "http://localhost/v1/health", &h)
		n := 0
		for _, m := range h.Meshes {
			if m.Connected {
				n++
			}
		}
		return n == 3
	})
	// A request that names no mesh acts on the daemon's own membership, not
	// on the other agents' identities: peers lists the local mesh once (not
	// once per identity on it), and a profile set goes to local alone.
	wait.For(t, e2eConnectDeadline, "the agents in the local mesh's peer list", func() bool {
		var body struct {
			Peers []struct{ Mesh, Pubkey string }
		}
		getJSON(c, "http://localhost/v1/peers", &body)
		seen := map[string]int{}
		for _, p := range body.Peers {
			seen[p.Pubkey]++
			if p.Mesh != "local" || seen[p.Pubkey] > 1 {
				t.Fatalf("GET /v1/peers lists %s under %s, %d times: %+v", p.Pubkey, p.Mesh, seen[p.Pubkey], body.Peers)
			}
		}
		return seen[key["bob"]] == 1 && seen[key["carol"]] == 1
	})
	if r := runCLI(t, e, "profile", "--summary", "the first agent", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"meshes":["local"]`) {
		t.Fatalf("claudemesh profile --summary with agents added: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, e, "profile", "--mesh", "bob", "--json"); r.code != 0 || strings.Contains(r.stdout, "the first agent") {
		t.Errorf("bob's profile after the first agent set its own: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A session minted with no mesh named joins the daemon's own membership:
	// another agent's identity is never a default, for launch and the MCP
	// server as for a plain send.
	if r := runCLI(t, e, "launch", "--name", "lone", "--", "true"); r.code != 0 {
		t.Fatalf("launch beside the agents' identities: exit %d\n%s", r.code, r.stderr)
	}
	send := func(from, to, body, id string) {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"mesh": from, "to": to, "message": body, "client_message_id": id})
		resp, err := c.Post("http://localhost/v1/send", "application/json", bytes.NewReader(b))
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("send %s from %s: %v %v", id, from, resp, err)
		}
		resp.Body.Close()
	}
	inbox := func(agent string) map[string]string {
		var page messages.InboxPage
		getJSON(c, "http://localhost/v1/inbox?mesh="+agent, &page)
		out := map[string]string{}
		for _, it := range page.Items {
			if it.Body != nil {
				out[it.ClientMessageID] = *it.Body
			}
		}
		return out
	}
	send("local", key["bob"], "a DM for bob", "dm-1")
	send("local", "*", "to the team", "topic-1")
	send("bob", key["local"], "bob answers", "dm-2")
	if r := runCLI(t, e, "send", "--mesh", "carol", "--client-message-id", "dm-3", "bob", "carol by name"); r.code != 0 {
		t.Fatalf("claudemesh send --mesh carol bob: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The first agent's plain send still goes out as it did before any
	// agent was added: from local.
	if r := runCLI(t, e, "send", "--client-message-id", "dm-plain", "bob", "local, no --mesh"); r.code != 0 {
		t.Fatalf("claudemesh send bob (no --mesh) with agents added: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := map[string]map[string]string{
		"bob":   {"dm-1": "a DM for bob", "topic-1": "to the team", "dm-3": "carol by name", "dm-plain": "local, no --mesh"},
		"carol": {"topic-1": "to the team"},
		"local": {"dm-2": "bob answers"},
	}
	var short string // the agent whose inbox does not hold its messages yet
	var got map[string]string
	if err := wait.Until(e2eDeliverDeadline, "every agent's messages", func() bool {
		for agent, msgs := range want {
			if got = inbox(agent); fmt.Sprint(got) != fmt.Sprint(msgs) {
				short = agent
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("%v: %s's inbox holds %v, want %v", err, short, got, want[short])
	}
	// An agent added while the daemon runs is attached at once (SIGHUP).
	r := runCLI(t, e, "daemon", "add-agent", "dave")
	if r.code != 0 || !strings.Contains(r.stdout, "the running daemon (pid") {
		t.Fatalf("daemon add-agent dave with the daemon running: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	getJSON(c, "http://localhost/v1/version", &v)
	for _, m := range v.Meshes {
		key[m.Mesh] = m.MemberPubkey
	}
	if key["dave"] == "" {
		t.Fatalf("dave is not served: %+v", v.Meshes)
	}
	wait.For(t, e2eConnectDeadline, "dave on the embedded broker", func() bool { return meshConnected(c, "dave") })
	send("local", key["dave"], "welcome dave", "dm-4")
	send("dave", "*", "dave joins the team", "topic-2")
	wait.For(t, e2eDeliverDeadline, "dave's DM and his topic message at the others", func() bool {
		return inbox("dave")["dm-4"] == "welcome dave" && inbox("bob")["topic-2"] == "dave joins the team" &&
			inbox("local")["topic-2"] == "dave joins the team"
	})
	// An agent removed from config.json is detached on SIGHUP; the rest go on.
	path := filepath.Join(e.configDir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, m := range doc["meshes"].([]any) {
		if m.(map[string]any)["slug"] != "carol" {
			kept = append(kept, m)
		}
	}
	doc["meshes"] = kept
	if raw, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait.For(t, e2eDeliverDeadline, "carol to be detached", func() bool {
		var v messages.Version
		getJSON(c, "http://localhost/v1/version", &v)
		return len(v.Meshes) == 3 && !slices.ContainsFunc(v.Meshes, func(m messages.MeshInfo) bool { return m.Mesh == "carol" })
	})
	b, _ := json.Marshal(map[string]string{"mesh": "carol", "to": "*", "message": "gone"})
	if resp, err := c.Post("http://localhost/v1/send", "application/json", bytes.NewReader(b)); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("send on a detached agent: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	send("bob", key["dave"], "still here", "dm-5")
	wait.For(t, e2eDeliverDeadline, "dave's DM after carol left", func() bool { return inbox("dave")["dm-5"] == "still here" })
	if d.exited() {
		t.Fatalf("the daemon exited when carol was detached: %v", d.waitErr)
	}
	t.Logf("checked: DMs between agents reach only their agent, a topic message every other agent once each, send --mesh by name; " +
		"an agent added to the running daemon is attached at once, one removed from config.json detached on SIGHUP")
}

// TestJoinAttachesToRunningDaemon: `claudemesh join` with a daemon running
// has it attach the new mesh at once (SIGHUP), which then connects.
func TestJoinAttachesToRunningDaemon(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t) // broker, mesh demo, alice and bob joined, no daemon
	e := newEnv(t)     // a daemon serving only its offline local mesh
	startDaemon(t, e, "--no-tcp")
	r := runCLI(t, e, "join", m.invite, "--name", "carol") // the invite's third use
	if r.code != 0 || !strings.Contains(r.stdout, "the running daemon (pid") {
		t.Fatalf("join with a daemon running: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	wait.For(t, e2eConnectDeadline, "the joined mesh to connect", func() bool { return meshConnected(c, "demo") })
	t.Log("checked: a mesh joined while the daemon runs is attached and connected without a restart")
}

// meshConnected reports whether the daemon behind c serves mesh and is
// connected to its broker.
func meshConnected(c *http.Client, mesh string) bool {
	var h messages.Health
	getJSON(c, "http://localhost/v1/health", &h)
	for _, m := range h.Meshes {
		if m.Mesh == mesh {
			return m.Connected
		}
	}
	return false
}
