package integration

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// TestBrokerRelayPollProcess: two `claudemesh broker up` processes on one
// PostgreSQL database; the second reaches it through a proxy that then cuts
// its LISTEN connections without a word, so it hears no notification and
// does not know it. A DM from a client of the first to a client of the
// second is still pushed within twice --relay-poll, and the second broker
// says so: a Warn relay_fallback_drain in its log, and
// cm_broker_relay_fallback_drains_total in its /metrics.
func TestBrokerRelayPollProcess(t *testing.T) {
	const poll = 300 * time.Millisecond
	dbURL := brokertest.PostgresURL(t)
	proxy, viaProxy := brokertest.NewProxy(t, dbURL)
	brokerEnv := newEnv(t)
	first := startBrokerProc(t, brokerEnv, "--database-url", dbURL)
	second := startBrokerProc(t, brokerEnv, "--database-url", viaProxy, "--relay-poll", poll.String())
	alice, bob, a, b := twoMembersOnReplicas(t, brokerEnv, dbURL, "relay", first, second)

	// bob's connection drains what waits for it just after its hello_ack: a
	// round trip on the connection proves that drain done. No DM goes to bob
	// before the cut, so no notification of one can start a drain that would
	// take relay-1 without the poll (a first DM pushed to bob did that when
	// its notification's drain ran late, under load).
	b.send(map[string]any{"type": messages.TypeListPeers})
	b.next(messages.TypePeersList)

	proxy.Cut(broker.DefaultListenName) // the second broker's LISTEN connections go deaf
	sent := time.Now()
	alice.sendDM(t, a, bob.Pubkey, "relay-1", "through the poll")
	if push := b.push(); push["client_message_id"] != "relay-1" {
		t.Fatalf("push on the second broker %v", push)
	}
	took := time.Since(sent)
	if bound := 2*poll + time.Second; took > bound || took < poll {
		t.Fatalf("pushed %v after the send, outside [%v, %v]: a push sooner than the poll came another way", took, poll, bound)
	}
	t.Logf("pushed %v after the send (poll %v)", took.Round(time.Millisecond), poll)

	// The relay logs and counts as the hub answers it, beside the push.
	wait.For(t, 5*time.Second, "relay_fallback_drain logged at Warn", func() bool {
		return strings.Contains(second.stderr.String(), `"level":"WARN","msg":"relay_fallback_drain"`)
	})
	resp, err := http.Get("http://" + second.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !regexp.MustCompile(`(?m)^cm_broker_relay_fallback_drains_total [1-9]`).Match(body) {
		t.Errorf("/metrics of the second broker counts no fallback drain")
	}
}
