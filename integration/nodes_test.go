package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// nodeSlack is how much longer than the broker's stale threshold a test
// waits for a node's state to change: the poll, a ping interval, a busy
// machine.
const nodeSlack = 5 * time.Second

// nodesOf asks p's daemon for the mesh's nodes (GET /v1/nodes) and returns
// them by name with the answer.
func nodesOf(t *testing.T, p *e2ePeer) (map[string]messages.NodeInfo, messages.NodeList) {
	t.Helper()
	var list messages.NodeList
	if st, _, err := getJSON(p.c, "http://localhost/v1/nodes", &list); err != nil || st != http.StatusOK {
		t.Fatalf("GET /v1/nodes at %s: %d %v", p.name, st, err)
	}
	out := map[string]messages.NodeInfo{}
	for _, n := range list.Nodes {
		out[n.Name] = n
	}
	return out, list
}

// waitNodeState polls watcher's GET /v1/nodes until the node of name is
// in a state other than online when want is "", else in want, within the
// broker's stale threshold and nodeSlack after since.
func waitNodeState(t *testing.T, watcher *e2ePeer, name, want string, since time.Time) messages.NodeInfo {
	t.Helper()
	for {
		nodes, list := nodesOf(t, watcher)
		n := nodes[name]
		if n.State != "" && (want == "" && n.State != messages.NodeOnline || n.State == want) {
			return n
		}
		if bound := time.Duration(list.StaleAfterMs)*time.Millisecond + nodeSlack; time.Since(since) > bound {
			t.Fatalf("%s's node still %q %s after it stopped (stale threshold %d ms); want %q; nodes %+v",
				name, n.State, time.Since(since).Round(time.Millisecond), list.StaleAfterMs, want, list.Nodes)
		}
		time.Sleep(50 * time.Millisecond) // poll interval; the condition is re-checked
	}
}

// TestNodes: three real daemons on a real broker that pings every 200 ms
// and calls a node stale after 1 s. carol's `claudemesh nodes` lists all
// three online with their host and version; alice's daemon, killed with
// SIGKILL, is no longer online within the threshold (its socket closed:
// offline); bob's, stopped (SIGSTOP: its link hangs, no close), turns
// stale within it, and online again once it runs. An unknown mesh and an
// unknown query parameter are refused with what to do.
func TestNodes(t *testing.T) {
	m := newE2EMesh(t)
	carol := m.join("carol")
	m.restartBrokerWith(append(e2eBrokerArgs(nil), "--ping-interval", "200ms", "--node-stale-after", "1s")...)
	for _, p := range []*e2ePeer{m.alice, m.bob, carol} {
		p.start(t)
	}
	var version messages.Version
	if st, _, err := getJSON(carol.c, "http://localhost/v1/version", &version); err != nil || st != http.StatusOK {
		t.Fatalf("version: %d %v", st, err)
	}
	host, _ := os.Hostname()

	r := runCLI(t, carol.env, "nodes", "--json")
	var list messages.NodeList
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil {
		t.Fatalf("claudemesh nodes --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if list.Mesh != "demo" || len(list.Nodes) != 3 || list.StaleAfterMs != 1000 {
		t.Fatalf("nodes: %+v; want alice, bob and carol in demo, stale after 1000 ms", list)
	}
	for _, n := range list.Nodes {
		if n.State != messages.NodeOnline || n.Host != host || n.Version != version.DaemonVersion || n.LastSeenAt == "" {
			t.Errorf("node %+v; want online on %s at version %s", n, host, version.DaemonVersion)
		}
	}
	if r := runCLI(t, carol.env, "nodes"); r.code != 0 || !strings.Contains(r.stdout, "NAME") ||
		!strings.Contains(r.stdout, "alice") || !strings.Contains(r.stdout, version.DaemonVersion) || !strings.Contains(r.stdout, " ago") {
		t.Errorf("claudemesh nodes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	killed := time.Now()
	m.alice.d.kill9()
	n := waitNodeState(t, carol, "alice", "", killed)
	t.Logf("alice %s %s after SIGKILL", n.State, time.Since(killed).Round(time.Millisecond))

	if err := m.bob.d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.bob.d.cmd.Process.Signal(syscall.SIGCONT) }) // before its daemon's stop
	stopped := time.Now()
	waitNodeState(t, carol, "bob", messages.NodeStale, stopped)
	t.Logf("bob stale %s after SIGSTOP", time.Since(stopped).Round(time.Millisecond))
	if err := m.bob.d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitNodeState(t, carol, "bob", messages.NodeOnline, time.Now())

	for _, c := range []struct {
		url    string
		status int
		code   string
	}{
		{"http://localhost/v1/nodes?mesh=nope", http.StatusNotFound, messages.CodeMeshNotAttached},
		{"http://localhost/v1/nodes?meshh=demo", http.StatusBadRequest, messages.CodeInvalidQuery},
		{"http://localhost/v1/nodes?mesh=demo&mesh=demo", http.StatusBadRequest, messages.CodeInvalidQuery},
	} {
		var body messages.ErrorBody
		if st, _, err := getJSON(carol.c, c.url, &body); err != nil || st != c.status || body.Error != c.code || body.Detail == "" {
			t.Errorf("GET %s: %d %+v %v; want %d %s", c.url, st, body, err, c.status, c.code)
		}
	}
	if r := runCLI(t, carol.env, "nodes", "--mesh", "nope"); r.code == 0 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("claudemesh nodes --mesh nope: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestNodesLegacyBroker: against a broker that does not advertise nodes
// (one speaking upstream's protocol), GET /v1/nodes is 501
// nodes_unsupported with what to use instead, and claudemesh nodes says
// so.
func TestNodesLegacyBroker(t *testing.T) {
	m := newE2EMesh(t)
	m.restartBrokerWith("--legacy-protocol")
	m.alice.startLegacy(t)
	var body messages.ErrorBody
	if st, _, err := getJSON(m.alice.c, "http://localhost/v1/nodes", &body); err != nil || st != http.StatusNotImplemented ||
		body.Error != messages.CodeNodesUnsupported || !strings.Contains(body.Detail, "claudemesh peers") {
		t.Errorf("GET /v1/nodes: %d %+v %v; want 501 nodes_unsupported", st, body, err)
	}
	if r := runCLI(t, m.alice.env, "nodes"); r.code == 0 || !strings.Contains(r.stderr, "does not list nodes") {
		t.Errorf("claudemesh nodes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
