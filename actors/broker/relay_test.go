package broker

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
)

// testRelayPoll is the relay poll of the replicas these tests cut off.
const testRelayPoll = 250 * time.Millisecond

// relayBound is how long a message may take to reach a replica that missed
// its notification: twice the poll, and a margin for a loaded machine.
const relayBound = 2*testRelayPoll + 1500*time.Millisecond

// attachRelayed starts another replica on first's database, its store
// opened with opts (a URL of its own), polling every testRelayPoll.
func attachRelayed(t *testing.T, first *env, opts broker.Options) *env {
	t.Helper()
	e := serveBrokerOpts(t, opts, Options{Limiter: ratelimit.NewMemory(noLimit), PresenceGrace: testGrace,
		DeliveryLease: testLease, RevocationCheck: testRevocationCheck, RelayPoll: testRelayPoll})
	e.mesh = first.mesh
	return e
}

// TestRelayAfterListenTerminated: the LISTEN connections of one replica
// are terminated in PostgreSQL (found by their application_name); a DM
// from a client of the other replica to a client of it, sent at once, is
// still pushed within the bound, and the replica counts the reconnect.
func TestRelayAfterListenTerminated(t *testing.T) {
	url := brokertest.PostgresURL(t)
	first := startBroker(t, broker.Options{DatabaseURL: url}, noLimit)
	name := "cmtest-relay-" + strings.ToLower(ulid.Make().String())
	second := attachRelayed(t, first, broker.Options{DatabaseURL: url + "&application_name=" + name})
	alice, bob := first.member("alice"), first.member("bob")
	a, b := first.connect(alice, "a"), second.connect(bob, "b")

	admin, err := sqlx.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// The replica's LISTEN connections (one a channel) share its name; the
	// delivery one's last query is its LISTEN until its first probe (5 s).
	listening := func() bool {
		var n int
		if err := admin.Get(&n, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1
			AND query = 'LISTEN claudemesh_delivery'`, name+"-listen"); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	wait.For(t, 10*time.Second, "the replica's delivery LISTEN", listening)
	var killed []bool
	if err := admin.Select(&killed, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
		name+"-listen"); err != nil || len(killed) < 2 {
		t.Fatalf("terminate the LISTEN backends: %v (%d)", err, len(killed))
	}
	sent := time.Now()
	a.send(sendFrame("relay-1", bob.id.PublicKeyHex(), "hello"))
	a.next("ack")
	if p := pushWithin(b, relayBound); p["client_message_id"] != "relay-1" {
		t.Fatalf("bob got %v, want relay-1", p)
	}
	t.Logf("pushed %v after the send (bound %v)", time.Since(sent).Round(time.Millisecond), relayBound)
	wait.For(t, 10*time.Second, "the delivery LISTEN reconnect counted", func() bool {
		return metric(t, second, `cm_broker_listen_reconnects_total{channel="delivery"}`) >= 1
	})
	wait.For(t, 10*time.Second, "the delivery LISTEN back", listening)
}

// TestRelayPollWhileListenDeaf: the LISTEN connections of one replica hear
// nothing while they look up — a partition cuts them without a word — so
// the replica misses every notification and cannot listen again; a DM to a
// client of it is still pushed within twice the relay poll, by the poll,
// and counted as a fallback drain — to a busy client, only priority "now".
func TestRelayPollWhileListenDeaf(t *testing.T) {
	url := brokertest.PostgresURL(t)
	proxy, viaProxy := brokertest.NewProxy(t, url)
	first := startBroker(t, broker.Options{DatabaseURL: url}, noLimit)
	second := attachRelayed(t, first, broker.Options{DatabaseURL: viaProxy}) // its listen check: the default 5 s
	alice, bob := first.member("alice"), first.member("bob")
	a, b := first.connect(alice, "a"), second.connect(bob, "b")
	// bob's hello drains its queue after hello_ack; a round trip through
	// its connection (frames are handled in order) puts that drain behind
	// us, so that only the poll takes what follows.
	b.send(map[string]any{"type": "list_peers", "_reqId": "settle"})
	b.next("peers_list")
	proxy.Cut(broker.DefaultListenName) // the replica's pool passes; its LISTEN connections go deaf
	if n := metric(t, second, "cm_broker_relay_fallback_drains_total"); n != 0 {
		t.Fatalf("fallback drains before the cut: %v", n)
	}
	for _, id := range []string{"deaf-1", "deaf-2"} {
		sent := time.Now()
		a.send(sendFrame(id, bob.id.PublicKeyHex(), "hello"))
		a.next("ack")
		if p := pushWithin(b, relayBound); p["client_message_id"] != id {
			t.Fatalf("bob got %v, want %s", p, id)
		}
		t.Logf("%s pushed %v after the send (bound %v)", id, time.Since(sent).Round(time.Millisecond), relayBound)
	}
	// Counted as the hub answers the relay, beside the push.
	wait.For(t, 10*time.Second, "a fallback drain counted for each message", func() bool {
		return metric(t, second, "cm_broker_relay_fallback_drains_total") >= 2
	})

	// A busy recipient takes only priority "now" from the poll too; the
	// rest waits for it to be idle.
	b.send(map[string]any{"type": "set_status", "status": "dnd"})
	held, urgent := sendFrame("deaf-held", bob.id.PublicKeyHex(), "hello"), sendFrame("deaf-urgent", bob.id.PublicKeyHex(), "hello")
	urgent["priority"] = "now"
	for _, f := range []map[string]any{held, urgent} {
		a.send(f)
		a.next("ack")
	}
	if p := pushWithin(b, relayBound); p["client_message_id"] != "deaf-urgent" {
		t.Fatalf("bob (dnd) got %v, want only the priority-now message", p)
	}
	b.send(map[string]any{"type": "set_status", "status": "idle"})
	if p := pushWithin(b, relayBound); p["client_message_id"] != "deaf-held" {
		t.Fatalf("bob (idle again) got %v, want the held message", p)
	}
}

// pushWithin returns c's next message push, acknowledged, failing after d.
func pushWithin(c *client, d time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(d)
	c.ws.SetReadDeadline(deadline)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.t.Fatalf("no push within %v: %v", d, err)
		}
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			c.t.Fatalf("frame is not JSON: %s", data)
		}
		if f["type"] == "push" && f["subtype"] != "system" {
			c.send(map[string]any{"type": "client_ack", "clientMessageId": f["client_message_id"], "brokerMessageId": f["messageId"]})
			return f
		}
	}
}

// metric reads one sample of the broker's /metrics (0 when absent).
func metric(t *testing.T, e *env, series string) float64 {
	t.Helper()
	resp, err := http.Get(e.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
