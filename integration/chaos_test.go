package integration

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// chaosRounds is how many processes TestChaosKills kills.
const chaosRounds = 24

// TestChaosKills: in each round one of the three processes — alice's
// daemon, bob's daemon or the broker, chosen at random — is SIGKILLed at a
// random moment of a send storm from alice, the storm goes on a little
// while it is down (alice queues), and it is started again. A reader
// follows bob's events throughout, resuming from the last event id it saw
// whenever bob comes back. At the end: every id answered 202 is in bob's
// inbox exactly once, no id twice; alice's outbox is all done; and the
// reader saw each message of bob's inbox exactly once across its streams.
// It runs with the broker on SQLite and on PostgreSQL.
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

func chaos(t *testing.T, m *e2eMesh) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>2))
	t.Logf("seed %d", seed)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)

	var mu sync.Mutex
	accepted := map[string]bool{} // answered 202
	seen := map[string]int{}      // message events bob's reader got, by id
	var lastID int64
	var readers sync.WaitGroup
	follow := func(from string) *sseStream {
		s := openSSE(t, bob.env.socket(), from)
		readers.Go(func() {
			for ev := range s.events {
				if ev.Name != "message" {
					continue
				}
				it := messageOf(t, ev)
				mu.Lock()
				seen[it.ClientMessageID]++
				lastID = ev.ID
				mu.Unlock()
			}
		})
		return s
	}
	reader := follow("") // live events from now on

	var next atomic.Int64
	killed := map[string]int{}
	for round := range chaosRounds {
		victim := []string{"alice", "bob", "broker"}[rng.IntN(3)]
		killAt, thenMore := rng.IntN(40), rng.IntN(30) // answered sends before the kill, and after it
		killed[victim]++
		c := unixClient(alice.env.socket())
		var got atomic.Int64
		reached, more := make(chan struct{}), make(chan struct{})
		var reachedOnce, moreOnce sync.Once
		var stop atomic.Bool
		var wg sync.WaitGroup
		var afterKill atomic.Int64 // answers counted once the victim is dead; -1 before
		afterKill.Store(-1)
		if killAt == 0 {
			reachedOnce.Do(func() { close(reached) })
		}
		for range 4 {
			wg.Go(func() {
				for !stop.Load() {
					id := fmt.Sprintf("ck-%05d", next.Add(1))
					st, _, err := trySend(c, bob.pubkey, "chaos "+id, id)
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
		case "alice":
			alice.d.kill9()
		case "bob":
			bob.d.kill9()
		case "broker":
			m.killBroker()
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
		case "bob":
			readers.Wait() // the stream ended with bob
			bob.start(t)
			mu.Lock()
			from := strconv.FormatInt(lastID, 10) // "0" (the whole log) if it saw nothing yet
			mu.Unlock()
			reader = follow(from)
		case "broker":
			m.restartBroker()
			alice.waitConnected(t)
			bob.waitConnected(t)
		}
	}

	reached(t, m, accepted)
	deliveredOnce(t, bob, accepted, e2eRecoveryDeadline)
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
	ids := map[string]bool{} // the sends whose answer a kill took are delivered too
	for _, r := range rows {
		ids[r.ClientMessageID] = true
	}
	reached(t, m, ids)
	counts := deliveredOnce(t, bob, ids, e2eRecoveryDeadline)
	var unseen []string
	pollUntil(t, e2eRecoveryDeadline, 50*time.Millisecond,
		func() string {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprintf("bob's reader to see every message of his inbox (last event id %d; not seen: %v)\n%s",
				lastID, unseen, m.diagnose(t, unseen))
		},
		func() bool {
			mu.Lock()
			defer mu.Unlock()
			unseen = unseen[:0]
			for id := range counts {
				if seen[id] == 0 {
					unseen = append(unseen, id)
				}
			}
			return len(unseen) == 0
		})
	reader.close()
	readers.Wait()
	mu.Lock()
	defer mu.Unlock()
	for id := range counts {
		if seen[id] != 1 {
			t.Errorf("bob's reader saw %s %d times across its streams", id, seen[id])
		}
	}
	t.Logf("checked across %d kill -9s (alice %d, bob %d, broker %d): %d ids answered 202, %d at bob, each once; "+
		"alice's %d outbox rows done; bob's reader saw each message once", chaosRounds, killed["alice"], killed["bob"],
		killed["broker"], len(accepted), len(counts), len(rows))
}

// reached waits until bob's inbox holds every id of want, and says where
// the missing ones are if it does not.
func reached(t *testing.T, m *e2eMesh, want map[string]bool) {
	t.Helper()
	var missing []string
	pollUntil(t, e2eRecoveryDeadline, 50*time.Millisecond,
		func() string {
			return fmt.Sprintf("bob's inbox to hold all %d ids (%d missing):\n%s", len(want), len(missing), m.diagnose(t, missing))
		},
		func() bool {
			counts := inboxCounts(inboxAll(t, m.bob.c))
			missing = missing[:0]
			for id := range want {
				if counts[id] == 0 {
					missing = append(missing, id)
				}
			}
			return len(missing) == 0
		})
}
