package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

// TestE2EReceiverKill9: bob's daemon is SIGKILLed while alice sends to it
// and a reader follows bob's events. Bob publishes a message's event as
// soon as its commit is visible and acks the broker after the fsync; a
// process's death keeps both the row and the event, and the broker pushes
// again what was not acked. After bob restarts, every message is in bob's
// inbox once, and the reader, resuming from the last event id it saw, gets
// exactly the messages it had not seen.
func TestE2EReceiverKill9(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)

	var mu sync.Mutex
	seen := map[string]int{}
	var lastID int64
	count := func(evs <-chan sseEvent) {
		for ev := range evs {
			if ev.Name != "message" {
				continue
			}
			it := messageOf(t, ev)
			mu.Lock()
			seen[it.ClientMessageID]++
			lastID = ev.ID
			mu.Unlock()
		}
	}
	nSeen := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	var readers sync.WaitGroup
	before := openSSE(t, bob.env.socket(), "")
	readers.Go(func() { count(before.events) })

	n := 0
	send := func(upTo int) error {
		for ; n < upTo; n++ {
			id := fmt.Sprintf("rk-%04d", n)
			if st, body, err := trySend(alice.c, bob.pubkey, "sent across bob's kill -9: "+id, id); err != nil || st != http.StatusAccepted {
				return fmt.Errorf("send %s: status %d, %v: %s", id, st, err, body)
			}
		}
		return nil
	}
	var sendErr error
	var sender sync.WaitGroup
	sender.Go(func() { sendErr = send(300) })
	waitFor(t, e2eDeliverDeadline, "bob's reader to see 100 messages", func() bool { return nSeen() >= 100 })
	bob.d.kill9()
	readers.Wait() // the stream ended with the process; count has what it read
	sender.Wait()
	if sendErr == nil {
		sendErr = send(400) // queued at alice while bob is down
	}
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	mu.Lock()
	mark, atKill := lastID, len(seen)
	mu.Unlock()
	t.Logf("bob SIGKILLed after its reader saw %d messages (last event id %d)", atKill, mark)

	bob.start(t)
	after := openSSE(t, bob.env.socket(), strconv.FormatInt(mark, 10))
	readers.Go(func() { count(after.events) })
	all := map[string]bool{}
	for i := range 400 {
		all[fmt.Sprintf("rk-%04d", i)] = true
	}
	reachedOnce(t, m, bob, all)
	waitFor(t, e2eRecoveryDeadline, "the resumed reader to have seen all 400", func() bool { return nSeen() == 400 })
	after.close()
	readers.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i := range 400 {
		if id := fmt.Sprintf("rk-%04d", i); seen[id] != 1 {
			t.Errorf("the reader saw %s %d times before and after the kill", id, seen[id])
		}
	}
}
