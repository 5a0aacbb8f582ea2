package integration

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// restartBrokerWith restarts the mesh's broker on the same address and
// store with args (and no other flag): the members joined it before.
// With --legacy-protocol it is in its legacy test mode: no feature
// negotiation, upstream's acks and error strings, a token bucket whose
// refusals carry no retry-after.
func (m *e2eMesh) restartBrokerWith(args ...string) {
	m.t.Helper()
	addr := m.broker.addr
	stopBroker(m.t, m.broker, syscall.SIGTERM)
	m.startBrokerAt(addr, args...)
}

// startBrokerAt starts the mesh's broker, stopped, on addr and its store
// with args (and no other flag).
func (m *e2eMesh) startBrokerAt(addr string, args ...string) {
	m.t.Helper()
	m.broker = startBrokerProc(m.t, m.brokerEnv, append(append(slices.Clone(m.store), "--listen", addr), args...)...)
}

// startLegacy starts p's daemon with `[features] legacy_broker = true` in
// its config.toml, as a user of the upstream broker would.
func (p *e2ePeer) startLegacy(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(p.env.file("config.toml"), []byte("[features]\nlegacy_broker = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start(t)
}

// TestLegacyBroker puts three daemons on a broker that speaks only the
// upstream protocol and checks what a user sees: a member is listed under
// the name it joined with and reached by it (item 3), DMs and broadcasts
// arrive, a #name send reaches the topic's members by its id and an
// unknown name is refused before it is stored (item 2), a send the broker
// refuses for good ends dead with upstream's reason, DMs to a member with
// no connection back off for that member only and arrive once it is back,
// and a backlog against the broker's rate limit arrives whole and in
// order, paced, with few refusals (item 4).
func TestLegacyBroker(t *testing.T) {
	m := newE2EMesh(t)
	carol := m.join("carol")
	// 600 a minute: 10 a second after a burst of 10, upstream's bucket scaled up tenfold.
	m.restartBrokerWith("--legacy-protocol", "--rate-limit", "600", "--rate-window", "1m")
	setMaxPayload(t, filepath.Join(m.brokerDir, broker.FileName), 1024) // read at each hello: before the daemons connect
	alice, bob := m.alice, m.bob
	for _, p := range []*e2ePeer{alice, bob, carol} {
		p.startLegacy(t)
	}

	// Our own name in hello: the upstream broker lists a member under it.
	waitPeerNamed(t, bob, alice.pubkey, "alice")
	if r := sendCLI(t, bob.env, "alice", "hello by name"); r.code != 0 {
		t.Fatalf("claudemesh send alice: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	waitInbox(t, alice.env, "hello by name")

	mustSend(t, alice.c, bob.pubkey, "a DM", "dm-1")
	mustSend(t, alice.c, "*", "to everyone", "bc-1")
	waitInbox(t, bob.env, "a DM")
	waitInbox(t, bob.env, "to everyone")
	waitInbox(t, carol.env, "to everyone")

	// Topics by id, as upstream's broker keeps them: the daemon resolves
	// #name through topic_list, a joined member gets it, others do not,
	// and a name no topic has is refused before anything is stored.
	for _, step := range []struct {
		p    *e2ePeer
		args []string
	}{{alice, []string{"topic", "create", "ops"}}, {bob, []string{"topic", "join", "ops"}}} {
		if r := runCLI(t, step.p.env, step.args...); r.code != 0 {
			t.Fatalf("%s: claudemesh %v: exit %d\n%s%s", step.p.name, step.args, r.code, r.stdout, r.stderr)
		}
	}
	mustSend(t, alice.c, "#ops", "to the ops topic", "topic-1")
	waitInbox(t, bob.env, "to the ops topic")
	if st, body, err := trySend(alice.c, "#nope", "to no topic", "topic-2"); err != nil || st != http.StatusNotFound {
		t.Fatalf("send #nope: %d %v %s; want 404", st, err, body)
	}
	if _, ok := byClientID(listAll(t, alice.c, ""))["topic-2"]; ok {
		t.Fatal("a send to no topic was stored")
	}

	// Refused for good: upstream's "payload too large: …" ends the row dead.
	mustSend(t, alice.c, bob.pubkey, strings.Repeat("x", 1500), "big-1")
	wait.For(t, sendDeliveryDeadline, "big-1 dead with upstream's reason", func() bool {
		row, ok := byClientID(listAll(t, alice.c, messages.StatusDead))["big-1"]
		return ok && row.LastError != nil && strings.HasPrefix(*row.LastError, "payload too large: ")
	})

	// No connected peer: bob's DMs wait out a backoff of their own while
	// carol's go through, and reach bob in order once he is back.
	bob.d.stop()
	mustSend(t, alice.c, bob.pubkey, "while away 1", "away-1")
	mustSend(t, alice.c, bob.pubkey, "while away 2", "away-2")
	mustSend(t, alice.c, carol.pubkey, "meanwhile", "carol-1")
	waitInbox(t, carol.env, "meanwhile")
	wait.For(t, sendDeliveryDeadline, "alice's health to show bob backing off", func() bool {
		return sendPace(t, alice.c).DestinationBackoffs == 1
	})
	if n := metricValue(t, alice.c, `cm_daemon_send_refused_total{mesh="demo",reason="no_connected_peer"}`); n < 1 {
		t.Errorf("no_connected_peer refusals counted: %v", n)
	}
	for _, id := range []string{"away-1", "away-2"} {
		if row := byClientID(listAll(t, alice.c, ""))[id]; row.Status != messages.StatusPending && row.Status != messages.StatusInflight {
			t.Fatalf("%s while bob is away: %s, want pending", id, row.Status)
		}
	}
	bob.start(t)
	waitInbox(t, bob.env, "while away 2")
	assertInOrder(t, inboxAll(t, bob.c), "away-1", "away-2")

	// A backlog against the rate limit: paced, whole, in order.
	const backlog = 60
	ids := make([]string, backlog)
	for i := range ids {
		ids[i] = fmt.Sprintf("bl-%02d", i)
		mustSend(t, alice.c, carol.pubkey, "backlog "+ids[i], ids[i])
	}
	waitInbox(t, carol.env, "backlog "+ids[backlog-1])
	wait.For(t, sendDeliveryDeadline, "the whole backlog at carol", func() bool {
		n := inboxCounts(inboxAll(t, carol.c))
		return !slices.ContainsFunc(ids, func(id string) bool { return n[id] == 0 })
	})
	assertInOrder(t, inboxAll(t, carol.c), ids...)
	if n := inboxCounts(inboxAll(t, carol.c)); n["topic-1"] != 0 {
		t.Error("carol, who did not join ops, got its message")
	}
	refused := metricValue(t, alice.c, `cm_daemon_send_refused_total{mesh="demo",reason="rate_limit"}`)
	if refused < 1 || refused > 2*backlog {
		t.Errorf("%v rate-limit refusals for a backlog of %d: want at least one, at most 2 a message", refused, backlog)
	}
	if p := sendPace(t, alice.c); p.RateLimited < 1 || p.PaceMs <= 0 {
		t.Errorf("alice's send_pace after the backlog: %+v; want the refusals counted and a pace", p)
	}
	if r := runCLI(t, alice.env, "daemon", "status"); r.code != 0 || !regexp.MustCompile(`sends to demo: .*paced`).MatchString(r.stdout) {
		t.Errorf("daemon status does not show the pace: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

// setMaxPayload sets the mesh's max_payload_bytes in the broker's SQLite
// database (no CLI sets it).
func setMaxPayload(t *testing.T, path string, n int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE mesh SET max_payload_bytes = ?`, n); err != nil {
		t.Fatalf("set max_payload_bytes: %v", err)
	}
}

// waitPeerNamed waits until p's peer list shows pubkey under name.
func waitPeerNamed(t *testing.T, p *e2ePeer, pubkey, name string) {
	t.Helper()
	var last []messages.Peer
	if err := wait.Until(sendDeliveryDeadline, fmt.Sprintf("%s to list %.12s as %q", p.name, pubkey, name), func() bool {
		var body struct {
			Peers []messages.Peer `json:"peers"`
		}
		st, _, err := getJSON(p.c, "http://localhost/v1/peers?mesh=demo", &body)
		last = body.Peers
		return err == nil && st == http.StatusOK && slices.ContainsFunc(body.Peers, func(x messages.Peer) bool {
			return x.Pubkey == pubkey && x.DisplayName == name
		})
	}); err != nil {
		t.Fatalf("%v (last %+v)", err, last)
	}
}

// sendPace is the one mesh's send_pace in c's GET /v1/health.
func sendPace(t *testing.T, c *http.Client) messages.SendPace {
	t.Helper()
	var h messages.Health
	if st, _, err := getJSON(c, "http://localhost/v1/health", &h); err != nil || st != http.StatusOK || len(h.Meshes) != 1 {
		t.Fatalf("GET /v1/health: %d %v %+v", st, err, h)
	}
	return h.Meshes[0].SendPace
}

// metricValue is the value of one series in c's GET /v1/metrics (0 when absent).
func metricValue(t testing.TB, c *http.Client, series string) float64 {
	t.Helper()
	resp, err := c.Get("http://localhost/v1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/metrics: %d %v", resp.StatusCode, err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// assertInOrder checks that the inbox holds each of ids once, in that order.
func assertInOrder(t *testing.T, items []messages.InboxItem, ids ...string) {
	t.Helper()
	var got []string
	for _, it := range items {
		if slices.Contains(ids, it.ClientMessageID) {
			got = append(got, it.ClientMessageID)
		}
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("inbox order %v, want %v", got, ids)
	}
}
