package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// faultProxy is a TCP proxy between a daemon and the broker that can delay
// bytes, cut every connection (mid-frame: a connection is closed after
// forwarding only part of what it read), and refuse new connections.
type faultProxy struct {
	t       *testing.T
	l       net.Listener
	target  atomic.Pointer[string] // where new connections go
	delay   atomic.Int64           // ns added before forwarding each read
	refuse  atomic.Bool
	cutNext atomic.Bool // the next chunk read is forwarded in part, then both sides close
	hole    atomic.Bool // bytes are read and dropped: a black hole, no close
	cuts    atomic.Int64
	mu      sync.Mutex
	conns   map[net.Conn]bool
}

func startFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{t: t, l: l, conns: map[net.Conn]bool{}}
	p.retarget(target)
	t.Cleanup(func() {
		l.Close()
		p.cutAll()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if p.refuse.Load() {
				c.Close()
				continue
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *faultProxy) addr() string { return p.l.Addr().String() }

// retarget sends new connections to addr (a load balancer moving to
// another broker replica); connections open stay where they are.
func (p *faultProxy) retarget(addr string) { p.target.Store(&addr) }

func (p *faultProxy) serve(client net.Conn) {
	upstream, err := net.Dial("tcp", *p.target.Load())
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns[client], p.conns[upstream] = true, true
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		defer func() { dst.Close(); src.Close() }()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if d := time.Duration(p.delay.Load()); d > 0 {
					time.Sleep(d) // the fault: latency on the path
				}
				if p.hole.Load() {
					continue
				}
				if p.cutNext.CompareAndSwap(true, false) {
					p.cuts.Add(1)
					dst.Write(buf[:max(n/2, 1)]) // part of a frame, then nothing
					return
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(upstream, client)
	pipe(client, upstream)
}

// cutAll closes every proxied connection at once.
func (p *faultProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// pointAt rewrites e's config.json so that its memberships reach the
// broker at addr through the proxy.
func (p *faultProxy) pointAt(e *env, brokerAddr string) { repoint(p.t, e, brokerAddr, p.addr()) }

// repoint rewrites e's config.json so that its memberships that reach the
// broker at from reach the one at to.
func repoint(t *testing.T, e *env, from, to string) {
	t.Helper()
	path := filepath.Join(e.configDir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), from) {
		t.Fatalf("config.json does not name the broker %s", from)
	}
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(raw), from, to)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFaultProxy: alice's daemon reaches the broker through a fault proxy.
// Under added latency, connections cut mid-frame three times and a spell of
// refused connections long enough to open the circuit breaker, every send
// alice answered 202 reaches bob exactly once and her outbox ends all done;
// the breaker opens while the broker is unreachable and closes once it is
// back.
func TestFaultProxy(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	proxy := startFaultProxy(t, m.broker.addr)
	proxy.pointAt(alice.env, m.broker.addr)
	alice.start(t)
	bob.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("alice's daemon log:\n%s", alice.d.stderr)
		}
	})

	storm := &dmStorm{t: t, from: alice, to: bob, prefix: "fp"}
	breaker := func() string {
		var h struct {
			Meshes []struct {
				Connected bool   `json:"connected"`
				Breaker   string `json:"breaker"`
			} `json:"meshes"`
		}
		if st, _, err := getJSON(alice.c, "http://localhost/v1/health", &h); err != nil || st != http.StatusOK || len(h.Meshes) != 1 {
			t.Fatalf("alice's /v1/health: %d %v", st, err)
		}
		if h.Meshes[0].Connected {
			return "connected"
		}
		return h.Meshes[0].Breaker
	}

	proxy.delay.Store(int64(20 * time.Millisecond))
	storm.send(100, nil)
	t.Log("checked: 100 sends accepted with 20 ms added each way")
	proxy.delay.Store(0)

	storm.send(150, func(i int) {
		if i%50 != 25 {
			return
		}
		// A cut, part-way through whatever comes next; the storm goes on
		// once it has been taken and alice is back on the broker.
		before := proxy.cuts.Load()
		proxy.cutNext.Store(true)
		storm.one(fmt.Sprintf("fp-cut-%d", i)) // traffic for the cut to fall on
		wait.For(t, e2eDeliverDeadline, "the cut to be taken", func() bool { return proxy.cuts.Load() > before })
		wait.For(t, e2eConnectDeadline, "alice to reconnect after the cut", func() bool { return breaker() == "connected" })
	})
	if c := proxy.cuts.Load(); c != 3 {
		t.Fatalf("%d connections cut mid-frame, want 3", c)
	}
	t.Log("checked: 150 sends accepted across three connections cut mid-frame")

	proxy.cutNext.Store(false) // a cut not yet taken must not hit the reconnection below
	proxy.refuse.Store(true)
	proxy.cutAll()
	wait.For(t, 40*time.Second, "alice's breaker to open while the broker is unreachable", func() bool { return breaker() == "open" })
	t.Log("checked: the breaker opened while every connect was refused")
	storm.send(50, nil) // accepted and queued while the broker is out of reach
	proxy.refuse.Store(false)
	wait.For(t, 45*time.Second, "alice to reconnect once the broker is reachable (half-open probe)", func() bool {
		return breaker() == "connected"
	})
	t.Log("checked: the breaker's probe reconnected once connections were allowed again")

	deliveredOnce(t, bob, storm.accepted)
	wait.For(t, e2eRecoveryDeadline, "alice's outbox to settle", func() bool {
		h := health(t, alice.c)
		return h.QueueDepth == 0 && h.Inflight == 0 && h.Dead == 0
	})
	t.Logf("checked: all %d sends at bob exactly once; alice's outbox all done", len(storm.accepted))
}

// silentLiveness is the daemons' --broker-liveness in TestSilentFailures:
// a connection silent this long is dropped (the protocol's 75 s, shortened).
const silentLiveness = "2s"

// TestSilentFailures: failures that close nothing, detected by liveness
// alone (shortened to 2 s). A black hole between alice and the broker (bytes
// read and dropped, nothing closed), then the broker paused with SIGSTOP
// longer than the liveness and resumed. Each time alice (and, for the pause,
// bob) notices, reconnects once the path heals, and every send answered 202
// reaches bob exactly once.
func TestSilentFailures(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	proxy := startFaultProxy(t, m.broker.addr)
	proxy.pointAt(alice.env, m.broker.addr)
	alice.start(t, "--broker-liveness", silentLiveness)
	bob.start(t, "--broker-liveness", silentLiveness)
	storm := &dmStorm{t: t, from: alice, to: bob, prefix: "sf"}
	storm.send(20, nil)
	proxy.hole.Store(true)
	storm.send(30, nil) // into the hole
	wait.For(t, 15*time.Second, "alice to drop her silent connection", func() bool { return !health(t, alice.c).Connected })
	proxy.hole.Store(false)
	wait.For(t, 45*time.Second, "alice to reconnect once the hole is gone", func() bool { return health(t, alice.c).Connected })
	deliveredOnce(t, bob, storm.accepted)
	t.Logf("checked: a black hole is noticed by liveness; after it, all %d sends at bob exactly once", len(storm.accepted))

	if err := m.broker.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer m.broker.cmd.Process.Signal(syscall.SIGCONT) // a failure below must not leave it stopped
	storm.send(30, nil)                                // accepted and queued while the broker is paused
	wait.For(t, 15*time.Second, "alice and bob to drop their connections to the paused broker", func() bool {
		return !health(t, alice.c).Connected && !health(t, bob.c).Connected
	})
	if err := m.broker.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 45*time.Second, "alice and bob to reconnect to the resumed broker", func() bool {
		return health(t, alice.c).Connected && health(t, bob.c).Connected
	})
	// A push the resumed broker wrote to bob's dropped connection goes out
	// again when that connection's close frees its lease, not 30 s later.
	deliveredOnce(t, bob, storm.accepted)
	wait.For(t, e2eRecoveryDeadline, "alice's outbox to settle", func() bool {
		h := health(t, alice.c)
		return h.QueueDepth == 0 && h.Inflight == 0 && h.Dead == 0
	})
	t.Logf("checked: a broker paused past the liveness is dropped by both daemons and reconnected when it resumes; "+
		"all %d sends at bob exactly once; alice's outbox all done", len(storm.accepted))
}

// dmStorm sends numbered DMs from one peer to another, one at a time, and
// remembers the ids answered 202; any other answer fails the test.
type dmStorm struct {
	t        *testing.T
	from, to *e2ePeer
	prefix   string
	n        int
	accepted map[string]bool
}

// send sends count DMs, calling during (if set) after each with its number.
func (s *dmStorm) send(count int, during func(i int)) {
	s.t.Helper()
	for range count {
		s.n++
		s.one(fmt.Sprintf("%s-%04d", s.prefix, s.n))
		if during != nil {
			during(s.n)
		}
	}
}

// one sends the DM with client_message_id id.
func (s *dmStorm) one(id string) {
	s.t.Helper()
	if st, body, err := trySend(s.from.c, s.to.pubkey, "storm "+id, id); err != nil || st != http.StatusAccepted {
		s.t.Fatalf("send %s: %d %v %s", id, st, err, body)
	}
	if s.accepted == nil {
		s.accepted = map[string]bool{}
	}
	s.accepted[id] = true
}
