package broker

import (
	"context"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// TestListenReplacesSilentConnection: a quiet healthy LISTEN connection is
// kept; one cut without a
// word (a partition: no RST, nothing passes either way) is found dead by
// the probe of its quiet wait; its loss is logged once, at Warn, however
// many reconnects fail while the partition lasts; once the network heals
// it is replaced within listenBound — connected again, so that every
// connection drains — and notifications flow on the new connection.
func TestListenReplacesSilentConnection(t *testing.T) {
	const check = 250 * time.Millisecond // short, yet a probe answers within it on a loaded machine
	proxy, url := brokertest.NewProxy(t, brokertest.PostgresURL(t))
	e := openEnv(t, Options{DatabaseURL: url, ListenCheck: check})
	m := e.mesh(t, Mesh{})
	alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connected := make(chan time.Time, 8)
	got := make(chan []Recipient, 16)
	go func() {
		_ = e.s.Listen(ctx, func(rs []Recipient) {
			if rs == nil {
				connected <- time.Now()
				return
			}
			for _, r := range rs {
				if r.MeshID == m.ID { // the channel is the database's: other tests notify on it too
					got <- rs
					return
				}
			}
		})
	}()
	waitConnected := func(within time.Duration) time.Time {
		t.Helper()
		select {
		case at := <-connected:
			return at
		case <-time.After(within):
			t.Fatalf("the listener did not connect within %v", within)
			return time.Time{}
		}
	}
	waitConnected(10 * time.Second)
	// Healthy and quiet, it is probed every check and kept: an observation
	// window of several checks sees no reconnect.
	select {
	case <-connected:
		t.Fatalf("a healthy quiet connection was replaced (%d losses logged)", e.logs.count("listen_lost"))
	case <-time.After(4 * check):
	}

	proxy.Cut(DefaultListenName) // the pool's connections are named otherwise and pass
	if err := wait.Until(10*time.Second, "two failed reconnects since the loss", func() bool {
		return e.logs.count("listen_retry_failed") >= 2
	}); err != nil {
		t.Fatalf("%v: the cut connection was not found dead: %d losses, %d failed retries logged", err,
			e.logs.count("listen_lost"), e.logs.count("listen_retry_failed"))
	}
	if n := e.logs.count("listen_lost"); n != 1 {
		t.Fatalf("listen_lost logged %d times for one loss", n)
	}
	proxy.Heal()
	healed := time.Now()
	at := waitConnected(listenBound(check) + time.Second)
	t.Logf("listening again %v after the partition healed (bound %v)", at.Sub(healed).Round(time.Millisecond), listenBound(check))
	if n := e.logs.count("listen_restored"); n != 1 {
		t.Errorf("listen_restored logged %d times", n)
	}
	e.accept(t, dm(m, alice, bob, "after-heal", "hello"))
	select {
	case rs := <-got:
		if len(rs) != 1 || rs[0] != (Recipient{MeshID: m.ID, Pubkey: bob.Pubkey}) {
			t.Fatalf("notified %+v, want bob", rs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification on the new connection")
	}
}
