package integration

import (
	"fmt"
	"slices"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestRateLimitBackoff: a backlog against our broker's rate limit (20
// sends per 2 s window, refusals with a retry-after) pauses the whole
// link until the window rolls, as /v1/health shows, then goes on paced;
// every message arrives once and in order, with at most 2 refused attempts
// a message.
func TestRateLimitBackoff(t *testing.T) {
	m := newE2EMesh(t)
	m.restartBrokerWith("--rate-limit", "20", "--rate-window", "2s")
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)

	const backlog = 60
	ids := make([]string, backlog)
	for i := range ids {
		ids[i] = fmt.Sprintf("rl-%02d", i)
		mustSend(t, alice.c, bob.pubkey, "backlog "+ids[i], ids[i])
	}
	wait.For(t, sendDeliveryDeadline, "alice's health to show the link paused", func() bool {
		return sendPace(t, alice.c).PausedUntil != ""
	})
	wait.For(t, 2*sendDeliveryDeadline, "the whole backlog at bob", func() bool {
		n := inboxCounts(inboxAll(t, bob.c))
		return !slices.ContainsFunc(ids, func(id string) bool { return n[id] == 0 })
	})
	assertInOrder(t, inboxAll(t, bob.c), ids...)
	refused := metricValue(t, alice.c, `cm_daemon_send_refused_total{mesh="demo",reason="rate_limit"}`)
	if refused < 1 || refused > 2*backlog {
		t.Errorf("%v rate-limit refusals for a backlog of %d: want at least one, at most 2 a message", refused, backlog)
	}
	if p := sendPace(t, alice.c); p.RateLimited < 1 || p.PaceMs <= 0 || p.Window != 1 {
		t.Errorf("alice's send_pace after the backlog: %+v; want the pauses counted, a pace, one send at a time", p)
	}
	if h := health(t, alice.c); h.QueueDepth != 0 || h.Inflight != 0 || h.Dead != 0 {
		t.Errorf("alice's outbox after the backlog: %+v; want every row done", h)
	}
}
