package broker

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
	"github.com/claudemesh/claudemesh-go/transport/wsserver"
)

// The heartbeat of the node tests' brokers, and their stale threshold.
const (
	testPing       = 100 * time.Millisecond
	testStaleAfter = 800 * time.Millisecond
)

// nodeBroker serves a broker on opts' database that pings every testPing
// and calls a node stale after testStaleAfter, with a mesh of its own.
func nodeBroker(t *testing.T, opts broker.Options) *env {
	t.Helper()
	opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := broker.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	b, err := Start(Options{Store: store, Limiter: ratelimit.NewMemory(noLimit), Log: opts.Log,
		Limits: wsserver.Limits{PingInterval: testPing}, NodeStaleAfter: testStaleAfter})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(func() { srv.Close(); b.Close(context.Background()) })
	mesh, err := store.CreateMesh(context.Background(), broker.Mesh{Slug: "nodes"})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, store: store, mesh: mesh, ws: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws", http: srv.URL}
}

// daemonHello is m's hello as our daemon sends it: its host and version.
func (e *env) daemonHello(m *member, host, version string) map[string]any {
	h := e.hello(m, "daemon-"+host)
	h["channel"], h["hostname"], h["daemonVersion"] = messages.ChannelDaemon, host, version
	return h
}

// answerPings reads c's frames in the background, dropping them, so that
// the broker's pings are answered: a live daemon's heartbeat. The client
// is not read otherwise after it.
func (c *client) answerPings() {
	c.ws.SetReadDeadline(time.Time{})
	go func() {
		for {
			if _, _, err := c.ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
}

// nodes asks list_nodes and returns the nodes by name, and stale_after_ms.
func (c *client) nodes() (map[string]map[string]any, float64) {
	c.t.Helper()
	c.send(map[string]any{"type": messages.TypeListNodes, "_reqId": "nd"})
	f := c.next(messages.TypeNodeList)
	if f["_reqId"] != "nd" {
		c.t.Fatalf("node_list answers %v, want _reqId nd", f["_reqId"])
	}
	out := map[string]map[string]any{}
	list, _ := f["nodes"].([]any)
	for _, n := range list {
		n := n.(map[string]any)
		out[n["name"].(string)] = n
	}
	stale, _ := f["stale_after_ms"].(float64)
	return out, stale
}

// waitNodes asks list_nodes until cond holds of the answer, failing after
// 10 s with what it saw last.
func (c *client) waitNodes(what string, cond func(map[string]map[string]any) bool) map[string]map[string]any {
	c.t.Helper()
	var nodes map[string]map[string]any
	if err := wait.Until(10*time.Second, what, func() bool { nodes, _ = c.nodes(); return cond(nodes) }); err != nil {
		c.t.Fatalf("%v: nodes %v", err, nodes)
	}
	return nodes
}

// TestNodes: a daemon's hello records its node (host, version, online); its
// heartbeats move last_seen_at; a daemon that stops answering pings turns
// stale once the threshold passes, and one that closes turns offline. A
// hello without host or version (upstream's daemon sends no version) is
// listed with them empty; sessions and our CLI's own connections are no
// nodes. The broker advertises nodes with its threshold.
func TestNodes(t *testing.T) {
	run := func(t *testing.T, e *env) {
		alice, bob, carol, dave, erin := e.member("alice"), e.member("bob"), e.member("carol"), e.member("dave"), e.member("erin")
		watcher := e.connectWith(e.sessionHello(carol, e.identity(), "watch"))
		watcher.send(map[string]any{"type": "feature_negotiation_request", "require": []string{"client_message_id_dedupe"}})
		supported, _ := watcher.next("feature_negotiation_response")["supported"].(map[string]any)
		if f, _ := supported[FeatureNodes].(map[string]any); f == nil ||
			f["params"].(map[string]any)["stale_after_ms"] != float64(testStaleAfter.Milliseconds()) {
			t.Errorf("nodes advertised as %v, want stale_after_ms %d", supported[FeatureNodes], testStaleAfter.Milliseconds())
		}

		a := e.connectWith(e.daemonHello(alice, "alice-box", "9.9.9"))
		a.answerPings()
		e.connectWith(e.daemonHello(bob, "bob-box", "9.9.8")) // never read: its pings go unanswered
		e.connect(dave, "daemon-upstream")                    // upstream's daemon: no version
		cli := e.hello(erin, "send")
		cli["channel"] = messages.ChannelCLI
		e.connectWith(cli)

		nodes, stale := watcher.nodes()
		if n := nodes["alice"]; n == nil || n["state"] != messages.NodeOnline || n["host"] != "alice-box" || n["version"] != "9.9.9" ||
			n["pubkey"] != alice.id.PublicKeyHex() || n["connected_at"] == "" || n["last_seen_at"].(string) < n["connected_at"].(string) {
			t.Errorf("alice after her hello: %v", n)
		}
		if n := nodes["dave"]; n == nil || n["state"] != messages.NodeOnline || n["host"] != "" || n["version"] != "" {
			t.Errorf("dave, a hello without host or version: %v", n)
		}
		if len(nodes) != 3 || nodes["carol"] != nil || nodes["erin"] != nil || stale != float64(testStaleAfter.Milliseconds()) {
			t.Errorf("nodes = %v (stale_after_ms %v); want alice, bob and dave, not carol's session nor erin's CLI", nodes, stale)
		}

		nodes = watcher.waitNodes("alice's heartbeat moves her last_seen_at; bob turns stale", func(n map[string]map[string]any) bool {
			return n["alice"]["last_seen_at"].(string) > n["alice"]["connected_at"].(string) && n["bob"]["state"] == messages.NodeStale
		})
		if nodes["alice"]["state"] != messages.NodeOnline {
			t.Errorf("alice, answering pings: %v, want online", nodes["alice"])
		}

		a.ws.Close()
		watcher.waitNodes("alice closed turns offline", func(n map[string]map[string]any) bool {
			return n["alice"]["state"] == messages.NodeOffline
		})
	}
	t.Run("sqlite", func(t *testing.T) { run(t, nodeBroker(t, broker.Options{Dir: t.TempDir()})) })
	t.Run("postgres", func(t *testing.T) { run(t, nodeBroker(t, broker.Options{DatabaseURL: brokertest.PostgresURL(t)})) })
}

// TestNodesAcrossReplicas: two brokers on one PostgreSQL database list the
// same nodes: a daemon connected to one is online at the other, and
// offline there once it closes.
func TestNodesAcrossReplicas(t *testing.T) {
	url := brokertest.PostgresURL(t)
	first := nodeBroker(t, broker.Options{DatabaseURL: url})
	second := attachBroker(t, first, broker.Options{DatabaseURL: url})
	alice, carol := first.member("alice"), first.member("carol")
	a := first.connectWith(first.daemonHello(alice, "alice-box", "9.9.9"))
	watcher := second.connectWith(second.sessionHello(carol, second.identity(), "watch"))
	if nodes, _ := watcher.nodes(); nodes["alice"]["state"] != messages.NodeOnline || nodes["alice"]["host"] != "alice-box" {
		t.Fatalf("alice, connected to the other replica: %v", nodes)
	}
	a.ws.Close()
	watcher.waitNodes("alice closed at the other replica turns offline", func(n map[string]map[string]any) bool {
		return n["alice"]["state"] == messages.NodeOffline
	})
}
