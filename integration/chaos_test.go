package integration

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// chaosRounds is how many processes TestChaosKills kills.
const chaosRounds = 24

// TestChaosKills: alice sends a storm of DMs to bob and of messages to
// #chaos (bob and carol). In each round one of the four processes — alice's
// daemon, bob's, carol's or the broker, chosen at random — is stopped at a
// random moment, SIGKILLed in three rounds of four and SIGTERMed (a
// graceful stop) in the others; the storm goes on a little while it is
// down (alice queues), and it is started again. A reader follows each receiver's
// events, resuming from the last event id it saw whenever its daemon comes
// back. At the end: every id answered 202 is in its recipients' inboxes
// exactly once (DMs at bob only), no id twice; alice's outbox is all done;
// and each reader saw each message of its inbox exactly once across its
// streams. It runs with the broker on SQLite and on PostgreSQL.
func TestChaosKills(t *testing.T) {
	t.Parallel()
	for _, backend := range []struct {
		name string
		mesh func(*testing.T) *e2eMesh
	}{{"sqlite", newE2EMesh}, {"postgres", newE2EMeshOnPostgres}} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			chaos(t, backend.mesh(t))
		})
	}
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

func chaos(t *testing.T, m *e2eMesh) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>2))
	t.Logf("seed %d", seed)
	alice, bob := m.alice, m.bob
	carol := m.join("carol")
	for _, p := range []*e2ePeer{alice, bob, carol} {
		p.start(t)
	}
	readers := map[string]*chaosReader{}
	for _, p := range []*e2ePeer{bob, carol} {
		r := &chaosReader{t: t, peer: p, seen: map[string]int{}}
		r.follow("")
		readers[p.name] = r
	}

	var mu sync.Mutex
	accepted := map[string]bool{} // answered 202
	var next atomic.Int64
	killed := map[string]int{}
	for round := range chaosRounds {
		victim := []string{"alice", "bob", "carol", "broker"}[rng.IntN(4)]
		killAt, thenMore := rng.IntN(40), rng.IntN(30) // answered sends before the kill, and after it
		sig := syscall.SIGKILL
		if rng.IntN(4) == 0 {
			sig = syscall.SIGTERM
		}
		killed[victim]++
		if sig == syscall.SIGTERM {
			killed["graceful"]++
		}
		c := unixClient(alice.env.socket())
		var got atomic.Int64
		reached, more := make(chan struct{}), make(chan struct{})
		var reachedOnce, moreOnce sync.Once
		var stop atomic.Bool
		var wg sync.WaitGroup
		var afterKill atomic.Int64 // answers once the victim is dead; -1 before
		afterKill.Store(-1)
		if killAt == 0 {
			reachedOnce.Do(func() { close(reached) })
		}
		for range 4 {
			wg.Go(func() {
				for !stop.Load() {
					n := next.Add(1)
					id, to := chaosSend(n, bob.pubkey)
					st, _, err := trySend(c, to, "chaos "+id, id)
					if err != nil {
						return // alice is gone: the answer is unknown
					}
					if st != http.StatusAccepted {
						continue
					}
					mu.Lock()
					accepted[id] = true
					mu.Unlock()
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
		switch victim {
		case "alice", "bob", "carol":
			d := map[string]*daemonProc{"alice": alice.d, "bob": bob.d, "carol": carol.d}[victim]
			if sig == syscall.SIGKILL {
				d.kill9()
			} else {
				d.stop() // checks a clean exit
			}
		case "broker":
			m.signalBroker(sig)
		}
		afterKill.Store(0)
		if victim != "alice" && thenMore > 0 {
			select {
			case <-more:
			case <-time.After(e2eDeliverDeadline):
				t.Fatalf("round %d: alice answered %d of %d sends with %s down", round, afterKill.Load(), thenMore, victim)
			}
		}
		stop.Store(true)
		wg.Wait()
		c.CloseIdleConnections()
		switch victim {
		case "alice":
			alice.start(t)
		case "bob", "carol":
			readers[victim].restarted()
		case "broker":
			m.restartBroker()
			for _, p := range []*e2ePeer{alice, bob, carol} {
				p.waitConnected(t)
			}
		}
	}

	waitFor(t, e2eRecoveryDeadline, "alice's outbox to settle (nothing pending or inflight)", func() bool {
		h := health(t, alice.c)
		return h.QueueDepth == 0 && h.Inflight == 0
	})
	rows := listAll(t, alice.c, "")
	for _, r := range rows {
		if r.Status != "done" {
			t.Errorf("alice's row %s is %s", r.ClientMessageID, r.Status)
		}
	}
	// Every row — the sends whose answer a kill took too — reaches its
	// recipients: all of them bob, the topic ones carol.
	forBob, forCarol := map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		forBob[r.ClientMessageID] = true
		if strings.HasPrefix(r.ClientMessageID, "ck-t-") {
			forCarol[r.ClientMessageID] = true
		}
	}
	for id := range accepted {
		if !forBob[id] {
			t.Errorf("alice answered %s 202 and has no row of it", id)
		}
	}
	for _, want := range []struct {
		p   *e2ePeer
		ids map[string]bool
	}{{bob, forBob}, {carol, forCarol}} {
		counts := reachedOnce(t, m, want.p, want.ids)
		r := readers[want.p.name]
		var unseen []string
		pollUntil(t, e2eRecoveryDeadline, 50*time.Millisecond,
			func() string {
				return fmt.Sprintf("%s's reader to see every message of the inbox (not seen: %v)\n%s",
					want.p.name, unseen, m.diagnoseFor(t, want.p, unseen))
			},
			func() bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				unseen = unseen[:0]
				for id := range counts {
					if r.seen[id] == 0 {
						unseen = append(unseen, id)
					}
				}
				return len(unseen) == 0
			})
		r.stream.close()
		r.reading.Wait()
		for id := range counts {
			if n := r.seen[id]; n != 1 {
				t.Errorf("%s's reader saw %s %d times across its streams", want.p.name, id, n)
			}
		}
	}
	t.Logf("checked across %d stops (alice %d, bob %d, carol %d, broker %d; %d of them SIGTERM, the others SIGKILL): "+
		"%d ids answered 202; alice's %d rows done; bob holds all %d, carol the %d topic ones, each once; "+
		"each reader saw each message once", chaosRounds, killed["alice"], killed["bob"], killed["carol"], killed["broker"],
		killed["graceful"], len(accepted), len(rows), len(forBob), len(forCarol))
}

// chaosSend is the n-th send of the storm: a DM to bob for even n, a
// message to #chaos (bob and carol) for odd n.
func chaosSend(n int64, bob string) (id, to string) {
	if n%2 == 0 {
		return fmt.Sprintf("ck-dm-%05d", n), bob
	}
	return fmt.Sprintf("ck-t-%05d", n), "#chaos"
}

// reachedOnce waits until p's inbox holds every id of want, saying where
// the missing ones are if it does not, then checks that it holds exactly
// those, each once; it returns p's inbox counts.
func reachedOnce(t *testing.T, m *e2eMesh, p *e2ePeer, want map[string]bool) map[string]int {
	t.Helper()
	var missing []string
	var counts map[string]int
	pollUntil(t, e2eRecoveryDeadline, 50*time.Millisecond,
		func() string {
			return fmt.Sprintf("%s's inbox to hold all %d ids (%d missing):\n%s", p.name, len(want), len(missing),
				m.diagnoseFor(t, p, missing))
		},
		func() bool {
			counts = inboxCounts(inboxAll(t, p.c))
			missing = missing[:0]
			for id := range want {
				if counts[id] == 0 {
					missing = append(missing, id)
				}
			}
			return len(missing) == 0
		})
	for id, n := range counts {
		if n != 1 || !want[id] {
			t.Errorf("%s's inbox holds %s %d times (expected: %v)", p.name, id, n, want[id])
		}
	}
	return counts
}
