package integration

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// crashIterations is how many times TestCrashPoints kills alice's daemon.
const crashIterations = 20

// TestCrashPoints: alice's daemon is SIGKILLed at a random moment of a send
// storm, 20 times over (the moment is a random count of answered sends,
// zero included: a kill right after the start). After the last restart:
// every id answered 202 reaches bob exactly once, no id — whatever its
// answer — reaches him twice, and alice's outbox ends with every row done,
// none stuck inflight or pending.
func TestCrashPoints(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("seed %d", seed)
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	bob.start(t)

	var mu sync.Mutex
	accepted := map[string]bool{} // answered 202
	var next atomic.Int64
	for it := range crashIterations {
		alice.start(t)
		killAt := rng.IntN(60) // answered sends before the kill
		c := unixClient(alice.env.socket())
		var got atomic.Int64
		reached := make(chan struct{})
		var once sync.Once
		if killAt == 0 {
			once.Do(func() { close(reached) })
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for !stop.Load() {
					id := fmt.Sprintf("cp-%05d", next.Add(1))
					st, _, err := trySend(c, bob.pubkey, "crash point "+id, id)
					if err != nil {
						return // the daemon is gone: the answer is unknown
					}
					if st == http.StatusAccepted {
						mu.Lock()
						accepted[id] = true
						mu.Unlock()
						if got.Add(1) >= int64(killAt) {
							once.Do(func() { close(reached) })
						}
					}
				}
			})
		}
		select {
		case <-reached:
		case <-time.After(e2eDeliverDeadline):
			t.Fatalf("iteration %d: %d of %d sends answered before the deadline", it, got.Load(), killAt)
		}
		alice.d.kill9()
		stop.Store(true)
		wg.Wait()
		c.CloseIdleConnections()
	}

	alice.start(t)
	total := len(accepted)
	deliveredOnce(t, bob, accepted)
	wait.For(t, e2eRecoveryDeadline, "alice's outbox to settle (nothing pending or inflight)", func() bool {
		h := health(t, alice.c)
		return h.QueueDepth == 0 && h.Inflight == 0
	})
	rows := listAll(t, alice.c, "")
	notDone := 0
	for _, r := range rows {
		if r.Status != "done" {
			notDone++
			t.Errorf("alice's row %s is %s", r.ClientMessageID, r.Status)
		}
	}
	// Rows of sends whose answer was lost in a kill are delivered too.
	ids := map[string]bool{}
	for _, r := range rows {
		ids[r.ClientMessageID] = true
	}
	counts := deliveredOnce(t, bob, ids)
	t.Logf("checked across %d kill -9s: %d ids answered 202 all at bob exactly once; %d ids at bob in all, none twice; "+
		"%d outbox rows, %d not done", crashIterations, total, len(counts), len(rows), notDone)
}

// deliveredOnce waits (at most e2eRecoveryDeadline) until bob's inbox holds every id of
// want, then checks that it holds no id twice; it returns the count of
// every id bob holds.
func deliveredOnce(t *testing.T, bob *e2ePeer, want map[string]bool) map[string]int {
	t.Helper()
	var counts map[string]int
	if err := wait.UntilEvery(e2eRecoveryDeadline, 50*time.Millisecond, fmt.Sprintf("bob's inbox to hold all %d ids", len(want)), func() bool {
		counts = inboxCounts(inboxAll(t, bob.c))
		for id := range want {
			if counts[id] == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("%v (holds %d ids)", err, len(counts))
	}
	for id, n := range counts {
		if n != 1 {
			t.Errorf("bob holds %s %d times", id, n)
		}
	}
	return counts
}
