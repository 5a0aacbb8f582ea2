package integration

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// legacyBacklogDeadline bounds the delivery of the concurrent broker's
// backlog: 300 DMs at 50 a second after the broker's burst, the daemons'
// reconnections first.
const legacyBacklogDeadline = 60 * time.Second

// TestLegacyConcurrentBacklog: on a broker that handles a connection's
// frames concurrently, as upstream's does (the legacy test mode with
// --legacy-concurrent: each frame after a random delay of up to 5 ms, so
// that two sends in flight are stored, acked and pushed in either order),
// a backlog of 300 DMs queued while the broker was away arrives whole,
// once each and in order: the daemon keeps one send in flight on a link
// that negotiated nothing, at its start (where it would otherwise send
// 16 at once) and after the broker's rate limit paused it. The limit is
// upstream's bucket of 10 refilled at 3,000 a minute.
func TestLegacyConcurrentBacklog(t *testing.T) {
	m := newE2EMesh(t)
	brokerArgs := []string{"--legacy-protocol", "--legacy-concurrent", "5ms", "--rate-limit", "3000", "--rate-window", "1m"}
	m.restartBrokerWith(brokerArgs...)
	alice, bob := m.alice, m.bob
	alice.startLegacy(t)
	bob.startLegacy(t)

	addr := m.broker.addr
	stopBroker(t, m.broker, syscall.SIGTERM)
	const backlog = 300
	ids := make([]string, backlog)
	for i := range ids {
		ids[i] = fmt.Sprintf("cc-%03d", i)
		mustSend(t, alice.c, bob.pubkey, "backlog "+ids[i], ids[i])
	}
	m.startBrokerAt(addr, brokerArgs...)

	var n map[string]int
	if err := wait.Until(legacyBacklogDeadline, "the whole backlog at bob", func() bool {
		n = inboxCounts(inboxAll(t, bob.c))
		return !slices.ContainsFunc(ids, func(id string) bool { return n[id] == 0 })
	}); err != nil {
		t.Fatalf("%v: %d of %d arrived\n%s", err, len(n), backlog, m.diagnose(t, slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return n[id] > 0 })))
	}
	for _, id := range ids {
		if n[id] != 1 {
			t.Errorf("%s arrived %d times", id, n[id])
		}
	}
	assertInOrder(t, inboxAll(t, bob.c), ids...)
	refused := metricValue(t, alice.c, `cm_daemon_send_refused_total{mesh="demo",reason="rate_limit"}`)
	if refused < 1 || refused > 2*backlog {
		t.Errorf("%v rate-limit refusals for a backlog of %d: want at least one, at most 2 a message", refused, backlog)
	}
}
