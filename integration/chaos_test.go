package integration

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// chaosRounds is how many processes a chaos test stops.
const chaosRounds = 24

// TestChaosKills: alice sends a storm of DMs to bob and of messages to
// #chaos (bob and carol). In each round one of the four processes — alice's
// daemon, bob's, carol's or the broker, chosen at random — is stopped at a
// random moment, SIGKILLed in three rounds of four and SIGTERMed (a
// graceful stop) in the others; the storm goes on a little while it is
// down (alice queues), and it is started again. A reader follows each
// receiver's events, resuming from the last event id it saw whenever its
// daemon comes back. At the end: every id answered 202 is in its
// recipients' inboxes exactly once (DMs at bob only), no id twice; alice's
// outbox is all done; and each reader saw each message of its inbox exactly
// once across its streams. It runs with the broker on SQLite and on
// PostgreSQL.
func TestChaosKills(t *testing.T) {
	t.Parallel()
	for _, backend := range e2eBackends {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			m := backend.mesh(t)
			carol := m.join("carol")
			c := newChaos(t, m, []*e2ePeer{m.bob, carol}, func(n int64) (id, to string) {
				if n%2 == 0 {
					return fmt.Sprintf("ck-dm-%05d", n), m.bob.pubkey
				}
				return fmt.Sprintf("ck-t-%05d", n), "*"
			})
			c.run(append(c.daemonVictims(), chaosVictim{name: "broker", stop: func(sig syscall.Signal) { stopBroker(t, m.broker, sig) }, restart: func() {
				m.restartBroker()
				c.waitConnected()
			}}))
			c.settle(map[*e2ePeer]func(id string) bool{
				m.bob: func(string) bool { return true },
				carol: func(id string) bool { return strings.HasPrefix(id, "ck-t-") },
			})
		})
	}
}

// TestChaosReplicas: two brokers on one PostgreSQL database serve the mesh,
// alice connected to the first and bob to the second, so every DM crosses
// from one replica to the other (the accept at one, NOTIFY, the push from
// the other). Each round stops alice, bob or either broker as
// TestChaosKills does; at the end every id answered 202 is in bob's inbox
// exactly once, alice's outbox is all done and bob's reader saw each
// message once.
func TestChaosReplicas(t *testing.T) {
	t.Parallel()
	m := newE2EMeshOnPostgres(t)
	second := startBrokerProc(t, m.brokerEnv, e2eBrokerArgs(m.store)...)
	// bob's membership names the second broker.
	cfg := filepath.Join(m.bob.env.configDir, "config.json")
	raw, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), m.broker.addr) {
		t.Fatalf("bob's config.json does not name %s:\n%s", m.broker.addr, raw)
	}
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(string(raw), m.broker.addr, second.addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newChaos(t, m, []*e2ePeer{m.bob}, func(n int64) (string, string) { return fmt.Sprintf("cr-%05d", n), m.bob.pubkey })
	stopSecond := func(sig syscall.Signal) { stopBroker(t, second, sig) }
	restartSecond := func() {
		addr := second.addr
		second = startBrokerProc(t, m.brokerEnv, append(e2eBrokerArgs(m.store), "--listen", addr)...)
		c.waitConnected()
	}
	c.run(append(c.daemonVictims(),
		chaosVictim{name: "broker", stop: func(sig syscall.Signal) { stopBroker(t, m.broker, sig) },
			restart: func() { m.restartBroker(); c.waitConnected() }},
		chaosVictim{name: "second broker", stop: stopSecond, restart: restartSecond}))
	c.settle(map[*e2ePeer]func(string) bool{m.bob: func(string) bool { return true }})
}

// chaos is a send storm from alice to receivers whose processes, and the
// brokers', are stopped and started again round after round.
type chaos struct {
	t         *testing.T
	m         *e2eMesh
	rng       *rand.Rand
	receivers []*e2ePeer
	readers   map[*e2ePeer]*chaosReader
	send      func(n int64) (id, to string) // the storm's n-th send
	mu        sync.Mutex
	accepted  map[string]bool // answered 202
	next      atomic.Int64
	stopped   map[string]int // by victim, and "graceful" for SIGTERMs
}

// chaosVictim is a process a round may stop: stop sends it a signal and
// waits for its exit, restart brings it back.
type chaosVictim struct {
	name    string
	stop    func(syscall.Signal)
	restart func()
}

// newChaos starts alice's and the receivers' daemons and a reader of each
// receiver's events.
func newChaos(t *testing.T, m *e2eMesh, receivers []*e2ePeer, send func(int64) (string, string)) *chaos {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	c := &chaos{t: t, m: m, rng: rand.New(rand.NewPCG(seed, seed>>2)), receivers: receivers,
		readers: map[*e2ePeer]*chaosReader{}, send: send, accepted: map[string]bool{}, stopped: map[string]int{}}
	m.alice.start(t)
	for _, p := range receivers {
		p.start(t)
		r := &chaosReader{t: t, peer: p, seen: map[string]int{}}
		r.follow("") // live events from now on
		c.readers[p] = r
	}
	return c
}

// daemonVictims are alice's daemon and each receiver's; a receiver's
// reader resumes after its restart.
func (c *chaos) daemonVictims() []chaosVictim {
	daemon := func(p *e2ePeer) func(syscall.Signal) {
		return func(sig syscall.Signal) {
			if sig == syscall.SIGKILL {
				p.d.kill9()
			} else {
				p.d.stop() // checks a clean exit
			}
		}
	}
	vs := []chaosVictim{{name: "alice", stop: daemon(c.m.alice), restart: func() { c.m.alice.start(c.t) }}}
	for _, p := range c.receivers {
		vs = append(vs, chaosVictim{name: p.name, stop: daemon(p), restart: c.readers[p].restarted})
	}
	return vs
}

func (c *chaos) waitConnected() {
	for _, p := range append([]*e2ePeer{c.m.alice}, c.receivers...) {
		p.waitConnected(c.t)
	}
}

// run plays chaosRounds rounds, each stopping one of victims at random.
func (c *chaos) run(victims []chaosVictim) {
	for round := range chaosRounds {
		v := victims[c.rng.IntN(len(victims))]
		sig := syscall.SIGKILL
		if c.rng.IntN(4) == 0 {
			sig = syscall.SIGTERM
			c.stopped["graceful"]++
		}
		c.stopped[v.name]++
		c.round(round, v, sig, c.rng.IntN(40), c.rng.IntN(30))
	}
}

// round sends until killAt sends are answered, stops v with sig, goes on
// until thenMore more are answered (unless v is alice, whose requests then
// fail), and starts v again.
func (c *chaos) round(round int, v chaosVictim, sig syscall.Signal, killAt, thenMore int) {
	t := c.t
	client := unixClient(c.m.alice.env.socket())
	defer client.CloseIdleConnections()
	var got atomic.Int64
	reached, more := make(chan struct{}), make(chan struct{})
	var reachedOnce, moreOnce sync.Once
	var stop atomic.Bool
	var wg sync.WaitGroup
	var afterKill atomic.Int64 // answers once the victim is down; -1 before
	afterKill.Store(-1)
	if killAt == 0 {
		reachedOnce.Do(func() { close(reached) })
	}
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				id, to := c.send(c.next.Add(1))
				st, _, err := trySend(client, to, "chaos "+id, id)
				if err != nil {
					return // alice is gone: the answer is unknown
				}
				if st != http.StatusAccepted {
					continue
				}
				c.mu.Lock()
				c.accepted[id] = true
				c.mu.Unlock()
				if got.Add(1) >= int64(killAt) {
					reachedOnce.Do(func() { close(reached) })
				}
				if afterKill.Load() >= 0 && afterKill.Add(1) >= int64(thenMore) {
					moreOnce.Do(func() { close(more) })
				}
			}
		})
	}
	select {
	case <-reached:
	case <-time.After(e2eDeliverDeadline):
		t.Fatalf("round %d: %d of %d sends answered before the deadline", round, got.Load(), killAt)
	}
	v.stop(sig)
	afterKill.Store(0)
	if v.name != "alice" && thenMore > 0 {
		select {
		case <-more:
		case <-time.After(e2eDeliverDeadline):
			t.Fatalf("round %d: alice answered %d of %d sends with %s down", round, afterKill.Load(), thenMore, v.name)
		}
	}
	stop.Store(true)
	wg.Wait()
	v.restart()
}

// settle waits for alice's outbox to drain and checks the end state: every
// row done; each receiver's inbox holds exactly the rows for it (forPeer),
// each once, and its reader saw each of them once.
func (c *chaos) settle(forPeer map[*e2ePeer]func(id string) bool) {
	t, alice := c.t, c.m.alice
	wait.For(t, e2eRecoveryDeadline, "alice's outbox to settle (nothing pending or inflight)", func() bool {
		h := health(t, alice.c)
		return h.QueueDepth == 0 && h.Inflight == 0
	})
	rows := listAll(t, alice.c, "")
	ids := map[string]bool{} // every row: the sends whose answer a stop took too
	for _, r := range rows {
		ids[r.ClientMessageID] = true
		if r.Status != "done" {
			t.Errorf("alice's row %s is %s", r.ClientMessageID, r.Status)
		}
	}
	for id := range c.accepted {
		if !ids[id] {
			t.Errorf("alice answered %s 202 and has no row of it", id)
		}
	}
	var held []string
	for p, isFor := range forPeer {
		want := map[string]bool{}
		for id := range ids {
			if isFor(id) {
				want[id] = true
			}
		}
		counts := reachedOnce(t, c.m, p, want)
		c.readers[p].sawEachOnce(c.m, counts)
		held = append(held, fmt.Sprintf("%s %d", p.name, len(counts)))
	}
	var stops []string
	for name, n := range c.stopped {
		stops = append(stops, fmt.Sprintf("%s %d", name, n))
	}
	slices.Sort(stops)
	slices.Sort(held)
	t.Logf("checked across %d stops (%s): %d ids answered 202; alice's %d rows done; each once at its receivers (%s); "+
		"each reader saw each message once", chaosRounds, strings.Join(stops, ", "), len(c.accepted), len(rows),
		strings.Join(held, ", "))
}

// chaosReader follows one receiver's message events across its restarts.
type chaosReader struct {
	t       *testing.T
	peer    *e2ePeer
	mu      sync.Mutex
	seen    map[string]int // message events by client_message_id
	lastID  int64
	stream  *sseStream
	reading sync.WaitGroup
}

// follow opens the stream after id from ("" for live events only).
func (r *chaosReader) follow(from string) {
	r.stream = openSSE(r.t, r.peer.env.socket(), from)
	evs := r.stream.events
	r.reading.Go(func() {
		for ev := range evs {
			if ev.Name != "message" {
				continue
			}
			it := messageOf(r.t, ev)
			r.mu.Lock()
			r.seen[it.ClientMessageID]++
			r.lastID = ev.ID
			r.mu.Unlock()
		}
	})
}

// restarted waits out the stream that ended with the daemon, starts the
// daemon again and resumes after the last id seen ("0", the whole log, if
// none was).
func (r *chaosReader) restarted() {
	r.reading.Wait()
	r.peer.start(r.t)
	r.mu.Lock()
	from := strconv.FormatInt(r.lastID, 10)
	r.mu.Unlock()
	r.follow(from)
}

// sawEachOnce waits until the reader has seen every message of counts (the
// receiver's inbox), then closes it and checks it saw each exactly once.
func (r *chaosReader) sawEachOnce(m *e2eMesh, counts map[string]int) {
	t := r.t
	var unseen []string
	if err := wait.UntilEvery(e2eRecoveryDeadline, 50*time.Millisecond, r.peer.name+"'s reader to see every message of the inbox", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		unseen = unseen[:0]
		for id := range counts {
			if r.seen[id] == 0 {
				unseen = append(unseen, id)
			}
		}
		return len(unseen) == 0
	}); err != nil {
		t.Fatalf("%v (not seen: %v)\n%s", err, unseen, m.diagnoseFor(t, r.peer, unseen))
	}
	r.stream.close()
	r.reading.Wait()
	for id := range counts {
		if n := r.seen[id]; n != 1 {
			t.Errorf("%s's reader saw %s %d times across its streams", r.peer.name, id, n)
		}
	}
}

// reachedOnce waits until p's inbox holds every id of want, saying where
// the missing ones are if it does not, then checks that it holds exactly
// those, each once; it returns p's inbox counts.
func reachedOnce(t *testing.T, m *e2eMesh, p *e2ePeer, want map[string]bool) map[string]int {
	t.Helper()
	var missing []string
	var counts map[string]int
	if err := wait.UntilEvery(e2eRecoveryDeadline, 50*time.Millisecond, fmt.Sprintf("%s's inbox to hold all %d ids", p.name, len(want)), func() bool {
		counts = inboxCounts(inboxAll(t, p.c))
		missing = missing[:0]
		for id := range want {
			if counts[id] == 0 {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	}); err != nil {
		t.Fatalf("%v (%d missing):\n%s", err, len(missing), m.diagnoseFor(t, p, missing))
	}
	for id, n := range counts {
		if n != 1 || !want[id] {
			t.Errorf("%s's inbox holds %s %d times (expected: %v)", p.name, id, n, want[id])
		}
	}
	return counts
}
